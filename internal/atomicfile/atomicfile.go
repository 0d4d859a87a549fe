package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data: it writes a temporary file in the same
// folder (".NAME.*.tmp": the leading dot keeps it out of readers that skip
// hidden files, such as container runtimes reading CDI specs), gives it
// perm, syncs it, renames it over path and syncs the folder, so that the
// rename itself is on disk when Write returns. On an error path is as it
// was and the temporary file is gone.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // nothing left after a rename
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"write", func() error { _, err := tmp.Write(data); return err }},
		{"set permissions of", func() error { return tmp.Chmod(perm) }},
		{"sync", tmp.Sync},
	} {
		if err := step.do(); err != nil {
			tmp.Close()
			return fmt.Errorf("%s %s: %w", step.what, path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync folder of %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync folder of %s: %w", path, err)
	}
	return nil
}
