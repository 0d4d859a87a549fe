package arbiter

import (
	"fmt"
	"path/filepath"

	"github.com/tessera-gpu/tessera/arbiter/grant"
	"github.com/tessera-gpu/tessera/binding"
)

// RegionFile is the grant region's name in a client's folder: the node
// agent mounts <run-dir>/<key> at /run/tessera and sets
// TESSERA_ARBITER_REGION=/run/tessera/grant (docs/handoff.md).
const RegionFile = "grant"

// Client is one container to arbitrate.
type Client struct {
	// Key is the allocation key (TESSERA_CONTAINER_ID): 1-128 characters
	// of [A-Za-z0-9_.-], starting alphanumeric.
	Key string
	// Dir is the container's run folder on the host (mounted as
	// TESSERA_SHM_DIR): the arbiter writes Dir/grant there and reads the
	// library's accounting file from it. Absolute.
	Dir string
	// GPUs are the container's shares in CUDA device order: GPUs[i] is
	// the container's device ordinal i and grant record i. 1-16 entries,
	// distinct UUIDs.
	GPUs []binding.Share
}

// validKey applies the library's TESSERA_CONTAINER_ID rule.
func validKey(k string) bool {
	if len(k) < 1 || len(k) > 128 {
		return false
	}
	for i, r := range k {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '_' && r != '.' && r != '-') {
			return false
		}
	}
	return true
}

// Validate checks a client; errors name the field and the allowed values.
func (c Client) Validate() error {
	if !validKey(c.Key) {
		return fmt.Errorf("key: must be 1-128 characters of [A-Za-z0-9_.-] starting alphanumeric, got %q", c.Key)
	}
	if !filepath.IsAbs(c.Dir) {
		return fmt.Errorf("client %s: dir: must be an absolute path, got %q", c.Key, c.Dir)
	}
	if len(c.GPUs) < 1 || len(c.GPUs) > grant.MaxDevices {
		return fmt.Errorf("client %s: gpus: must list 1 to %d GPUs, got %d", c.Key, grant.MaxDevices, len(c.GPUs))
	}
	seen := map[string]bool{}
	for i, g := range c.GPUs {
		switch {
		case g.UUID == "":
			return fmt.Errorf("client %s: gpus[%d].uuid: must not be empty", c.Key, i)
		case seen[g.UUID]:
			return fmt.Errorf("client %s: gpus[%d].uuid: %s listed twice", c.Key, i, g.UUID)
		case g.ComputeMilli < 1 || g.ComputeMilli > 1000:
			return fmt.Errorf("client %s: gpus[%d].compute: must be in [1, 1000], got %d", c.Key, i, g.ComputeMilli)
		case g.ComputeLimitMilli < g.ComputeMilli || g.ComputeLimitMilli > 1000:
			return fmt.Errorf("client %s: gpus[%d].computeLimit: must be in [%d, 1000], got %d",
				c.Key, i, g.ComputeMilli, g.ComputeLimitMilli)
		}
		seen[g.UUID] = true
	}
	return nil
}
