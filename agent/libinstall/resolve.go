package libinstall

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Resolve returns the file the interception library path names, following
// symlinks: Install keeps each version in its own folder and points a
// stable symlink at the current one, and a container must be given the
// versioned file itself, so that a later upgrade, which swaps the symlink,
// never changes the library under a running container. The path is
// resolved where the caller runs, so the agent must see the library's
// folder at its host path (the DaemonSet mounts it there).
func Resolve(path string) (string, error) {
	lib, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("intercept library %q: does not exist on this node (install it with \"tessera install-lib\", or give no library to run containers without in-container enforcement)", path)
		}
		return "", fmt.Errorf("intercept library %q: %w", path, err)
	}
	fi, err := os.Stat(lib)
	if err != nil {
		return "", fmt.Errorf("intercept library %q: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("intercept library %q: %s is not a regular file", path, lib)
	}
	return lib, nil
}
