package nvmlmeter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/tessera-gpu/tessera/shareenv"
)

// DefaultProcRoot is where resolvers read processes unless told otherwise.
const DefaultProcRoot = "/proc"

// Resolver maps a host process ID, as NVML reports it, to the arbiter
// client key (TESSERA_CONTAINER_ID) of the container or job it belongs to.
// ok is false for a process that belongs to no client, including one that
// has exited; err is for a process that could not be examined.
type Resolver interface {
	Resolve(ctx context.Context, pid uint32) (key string, ok bool, err error)
}

// procFile reads <root>/<pid>/<name>; a process that is gone is not an error
// (ok is false).
func procFile(root string, pid uint32, name string) (data []byte, ok bool, err error) {
	if root == "" {
		root = DefaultProcRoot
	}
	path := filepath.Join(root, strconv.FormatUint(uint64(pid), 10), name)
	data, err = os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return data, true, nil
}

// Cgroup resolves Kubernetes containers: it parses /proc/<pid>/cgroup
// (ParseCgroup) and asks Lookup for the client key of that container.
type Cgroup struct {
	// ProcRoot is the proc file system, DefaultProcRoot when empty.
	ProcRoot string
	// Lookup returns the client key of a container; false when the
	// container has no client (or, for a pod with several, cannot tell
	// which: Environ can then be tried).
	Lookup func(Container) (key string, ok bool)
}

// Resolve implements Resolver.
func (c Cgroup) Resolve(ctx context.Context, pid uint32) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	data, ok, err := procFile(c.ProcRoot, pid, "cgroup")
	if !ok || err != nil {
		return "", false, err
	}
	ctr, ok := ParseCgroup(string(data))
	if !ok || c.Lookup == nil {
		return "", false, nil
	}
	key, ok := c.Lookup(ctr)
	return key, ok, nil
}

// Environ resolves a process by the TESSERA_CONTAINER_ID in its initial
// environment (/proc/<pid>/environ). Reading another user's environ needs
// the same user or CAP_SYS_PTRACE; a process that replaced its environment
// before exec'ing is not found.
type Environ struct {
	// ProcRoot is the proc file system, DefaultProcRoot when empty.
	ProcRoot string
}

// Resolve implements Resolver.
func (e Environ) Resolve(ctx context.Context, pid uint32) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	data, ok, err := procFile(e.ProcRoot, pid, "environ")
	if !ok || err != nil {
		return "", false, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(shareenv.ContainerID+"=")); ok && len(v) > 0 {
			return string(v), true, nil
		}
	}
	return "", false, nil
}

// maxDepth bounds the walk up the process tree.
const maxDepth = 64

// ProcTree resolves processes that descend from known root processes: the
// host daemon's jobs, each a process tree under the supervisor it started.
type ProcTree struct {
	// ProcRoot is the proc file system, DefaultProcRoot when empty.
	ProcRoot string
	// Roots returns the root process of every client, by PID. It is
	// called on every Resolve, so it should be cheap.
	Roots func(ctx context.Context) (map[int]string, error)
}

// Resolve implements Resolver: pid resolves to the key of the first root
// found walking up its parents (/proc/<pid>/stat field 4), itself first.
func (t ProcTree) Resolve(ctx context.Context, pid uint32) (string, bool, error) {
	if t.Roots == nil {
		return "", false, nil
	}
	roots, err := t.Roots(ctx)
	if err != nil {
		return "", false, fmt.Errorf("process tree roots: %w", err)
	}
	if len(roots) == 0 {
		return "", false, nil
	}
	cur := pid
	for range maxDepth {
		if key, ok := roots[int(cur)]; ok {
			return key, true, nil
		}
		if cur <= 1 {
			return "", false, nil
		}
		data, ok, err := procFile(t.ProcRoot, cur, "stat")
		if !ok || err != nil {
			return "", false, err
		}
		ppid, err := parentOf(data)
		if err != nil {
			return "", false, fmt.Errorf("process %d: %w", cur, err)
		}
		cur = ppid
	}
	return "", false, nil
}

// parentOf reads the parent PID (field 4) from a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so fields are counted after the last ')'.
func parentOf(stat []byte) (uint32, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("stat: too few fields in %q", stat)
	}
	ppid, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("stat: parent pid: %w", err)
	}
	return uint32(ppid), nil
}

// First tries resolvers in order and returns the first key found. An error
// from one is returned only when no later one resolves the process.
type First []Resolver

// Resolve implements Resolver.
func (rs First) Resolve(ctx context.Context, pid uint32) (string, bool, error) {
	var errs []error
	for _, r := range rs {
		key, ok, err := r.Resolve(ctx, pid)
		if ok {
			return key, true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return "", false, errors.Join(errs...)
}
