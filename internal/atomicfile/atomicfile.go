package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Write replaces path with data: it writes a temporary file in the same
// folder (".NAME.*.tmp": the leading dot keeps it out of readers that skip
// hidden files, such as container runtimes reading CDI specs), gives it
// perm, syncs it, renames it over path and syncs the folder, so that the
// rename itself is on disk when Write returns. On an error path is as it
// was and the temporary file is gone.
func Write(path string, data []byte, perm fs.FileMode) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer d.Close()
	return writeIn(d, filepath.Base(path), path, data, perm, true)
}

// WriteIn is Write for the file name in the open folder dir: the
// temporary file is created and renamed relative to dir (never through a
// link: the temporary is created with O_EXCL|O_NOFOLLOW), so that
// whatever happens to dir's path meanwhile, the file lands in dir.
func WriteIn(dir *os.File, name string, data []byte, perm fs.FileMode) error {
	return writeIn(dir, name, filepath.Join(dir.Name(), name), data, perm, true)
}

// ReplaceIn is WriteIn without the syncs: a reader sees the old content
// or the new, but a crash may lose the replacement (for a file rebuilt
// from elsewhere). The temporary file is gone on an error too.
func ReplaceIn(dir *os.File, name string, data []byte, perm fs.FileMode) error {
	return writeIn(dir, name, filepath.Join(dir.Name(), name), data, perm, false)
}

func writeIn(dir *os.File, name, path string, data []byte, perm fs.FileMode, durable bool) error {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return fmt.Errorf("write %s: %q must be a file name in the folder", path, name)
	}
	dfd := int(dir.Fd())
	tmpName, fd, err := createTemp(dfd, name)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), tmpName))
	renamed := false
	defer func() {
		if !renamed {
			_ = unix.Unlinkat(dfd, tmpName, 0)
		}
	}()
	steps := []struct {
		what string
		do   func() error
	}{
		{"write", func() error { _, err := tmp.Write(data); return err }},
		{"set permissions of", func() error { return tmp.Chmod(perm) }},
	}
	if durable {
		steps = append(steps, struct {
			what string
			do   func() error
		}{"sync", tmp.Sync})
	}
	for _, step := range steps {
		if err := step.do(); err != nil {
			tmp.Close()
			return fmt.Errorf("%s %s: %w", step.what, path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := unix.Renameat(dfd, tmpName, dfd, name); err != nil {
		return fmt.Errorf("replace %s: %w", path, &fs.PathError{Op: "rename", Path: path, Err: err})
	}
	renamed = true
	if !durable {
		return nil
	}
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("sync folder of %s: %w", path, err)
	}
	return nil
}

// createTemp creates ".NAME.RANDOM.tmp" in the folder dfd, exclusively.
func createTemp(dfd int, name string) (string, int, error) {
	for range 100 {
		var b [6]byte
		_, _ = rand.Read(b[:])
		tmp := "." + name + "." + hex.EncodeToString(b[:]) + ".tmp"
		fd, err := unix.Openat(dfd, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		switch err {
		case nil:
			return tmp, fd, nil
		case unix.EEXIST, unix.EINTR:
			continue
		}
		return "", -1, &fs.PathError{Op: "create", Path: tmp, Err: err}
	}
	return "", -1, fmt.Errorf("create a temporary file: too many names taken")
}

// IsTemp reports whether name is the name of a temporary file Write or
// WriteIn makes for the file target (one a crash may leave behind).
func IsTemp(name, target string) bool {
	rest, ok := strings.CutPrefix(name, "."+target+".")
	if !ok {
		return false
	}
	rand, ok := strings.CutSuffix(rest, ".tmp")
	return ok && rand != ""
}
