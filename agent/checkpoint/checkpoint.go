package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/internal/statefile"
)

// Version is the file format this package writes and reads.
const Version = 1

// File is the checkpoint's content.
type File struct {
	Version int     `json:"version"`
	Node    string  `json:"node"`
	Entries []Entry `json:"entries"`
}

// Entry is one container's allocation.
type Entry struct {
	// Key is the allocation key (TESSERA_CONTAINER_ID).
	Key string `json:"key"`
	// DeviceIDs are the devices kubelet allocated to the container.
	DeviceIDs []string `json:"deviceIDs"`
	Namespace string   `json:"namespace"`
	Pod       string   `json:"pod"`
	PodUID    string   `json:"podUID"`
	Container string   `json:"container"`
	// GPUs are the shares handed to the container, in device order.
	GPUs []binding.Share `json:"gpus"`
	// Verified is set once kubelet's own record confirmed the identity.
	Verified bool      `json:"verified,omitempty"`
	Created  time.Time `json:"created"`
}

// Validate checks an entry; errors name the field.
func (e Entry) Validate() error {
	switch {
	case e.Key == "":
		return errors.New("key: must not be empty")
	case len(e.DeviceIDs) == 0:
		return fmt.Errorf("entry %s: deviceIDs: must list at least one device", e.Key)
	case e.Namespace == "" || e.Pod == "" || e.Container == "":
		return fmt.Errorf("entry %s: namespace, pod and container must be set", e.Key)
	case len(e.GPUs) != len(e.DeviceIDs):
		return fmt.Errorf("entry %s: gpus: must list one share per device (%d), got %d", e.Key, len(e.DeviceIDs), len(e.GPUs))
	}
	return nil
}

// format is the checkpoint's kind of state file.
func format() statefile.Format { return statefile.Format{Name: "checkpoint", Version: Version} }

// Load reads the checkpoint at path; a missing file is an empty checkpoint.
// A damaged file, one of another version, one with a field it does not know
// or an invalid entry is an error naming the file.
func Load(path string) (File, error) {
	var f File
	found, err := format().Load(path, &f)
	if err != nil {
		return File{}, err
	}
	if !found {
		return File{Version: Version}, nil
	}
	for _, e := range f.Entries {
		if err := e.Validate(); err != nil {
			return File{}, fmt.Errorf("checkpoint %s: %w", path, err)
		}
	}
	return f, nil
}

// Save writes f to path atomically, creating its folder (0700) if needed.
func Save(path string, f File) error {
	f.Version = Version
	sort.Slice(f.Entries, func(i, j int) bool { return f.Entries[i].Key < f.Entries[j].Key })
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create checkpoint folder: %w", err)
	}
	return format().Save(path, f)
}
