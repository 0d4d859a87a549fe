package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/internal/atomicfile"
)

// ErrLink is wrapped by the errors of a call that met a symbolic link (or
// a ".." that leaves its root) on the way to what it was asked to open.
var ErrLink = errors.New("is a symbolic link")

// ErrUnsafe is wrapped by the errors of a folder another user could
// change: not owned by this process's effective user, or writable by its
// group or others (CheckStateDir, OpenDir, MkdirAll).
var ErrUnsafe = errors.New("another user could change it")

// PrepareStateDir creates dir owner-only (0700, with any missing parents)
// when it does not exist, then checks it with CheckStateDir.
func PrepareStateDir(dir, what string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	return CheckStateDir(dir, what)
}

// CheckStateDir refuses dir when a user other than this process's
// effective user (and root) could replace what is in it: dir must be a
// folder owned by the effective user and not writable by its group or
// others, and each of its parents must belong to root or the effective
// user and be writable by no one else unless it has the sticky bit (as
// /tmp has: others may not rename what is not theirs). Links in dir's
// path are resolved first and the real path is checked. what names dir
// in the messages ("state folder", "job folder").
func CheckStateDir(dir, what string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s: must be a folder, got a file of mode %s", what, dir, fi.Mode())
	}
	name := dir
	if real != abs {
		name = fmt.Sprintf("%s (%s)", dir, real)
	}
	if err := checkOwn(name, real, fi, what); err != nil {
		return err
	}
	euid := os.Geteuid()
	for p := filepath.Dir(real); ; p = filepath.Dir(p) {
		pfi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("%s %s: parent %s: %w", what, name, p, err)
		}
		uid, perm := owner(pfi), pfi.Mode().Perm()
		switch {
		case uid != 0 && uid != euid:
			return fmt.Errorf("%s %s: %w: its parent %s (owner %s, mode %04o) belongs to another user, who could move it away and put a folder of their own in its place; use a %s whose parents belong to root or %s, or run chown %d %s if that folder is yours",
				what, name, ErrUnsafe, p, describeUID(uid), perm, what, describeUID(euid), euid, p)
		case perm&0o022 != 0 && pfi.Mode()&fs.ModeSticky == 0:
			return fmt.Errorf("%s %s: %w: its parent %s (owner %s, mode %04o) is writable by group or others without the sticky bit, so they could move it away and put a folder of their own in its place; run chmod go-w %s (or chmod +t %s, as /tmp has), or use a %s elsewhere",
				what, name, ErrUnsafe, p, describeUID(uid), perm, p, p, what)
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}

// checkOwn refuses a folder not owned by the effective user or writable
// by group or others.
func checkOwn(name, path string, fi fs.FileInfo, what string) error {
	uid, perm, euid := owner(fi), fi.Mode().Perm(), os.Geteuid()
	switch {
	case uid != euid:
		return fmt.Errorf("%s %s: %w: it belongs to %s (mode %04o), not to this process's user %s, and its owner could replace the files in it with links to files of their choosing; use a %s of your own, or run chown %d %s if it is yours",
			what, name, ErrUnsafe, describeUID(uid), perm, describeUID(euid), what, euid, path)
	case perm&0o022 != 0:
		return fmt.Errorf("%s %s: %w: it is writable by group or others (owner %s, mode %04o), who could replace the files in it with links to files of their choosing; run chmod 700 %s",
			what, name, ErrUnsafe, describeUID(uid), perm, path)
	}
	return nil
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// describeUID says "uid N (name)", or "uid N" when no user has it.
func describeUID(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

// OpenFile opens root/name as os.OpenFile would, without following any
// symbolic link and without leaving root: name is slash-separated and
// local (no "..", not absolute). root itself is opened as named.
func OpenFile(root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	full := filepath.Join(root, filepath.FromSlash(name))
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return nil, &fs.PathError{Op: "open", Path: full, Err: fmt.Errorf("%q: must be a path inside %s", name, root)}
	}
	rfd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rfd)
	fd, err := openBeneath(rfd, path.Clean(name), flag, uint32(perm.Perm()))
	if err != nil {
		return nil, pathError(root, name, err)
	}
	return os.NewFile(uintptr(fd), full), nil
}

// openBeneath opens name under the folder rfd with openat2's
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or by walking where the kernel has
// no openat2.
func openBeneath(rfd int, name string, flag int, perm uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flag | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	}
	if flag&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(perm)
	}
	for {
		fd, err := unix.Openat2(rfd, name, &how)
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err == unix.ENOSYS:
			return walk(rfd, name, flag, perm)
		}
		return fd, err
	}
}

// walk opens name under rfd one component at a time, each with
// O_NOFOLLOW: what openat2 does on kernels without it (before 5.6).
func walk(rfd int, name string, flag int, perm uint32) (int, error) {
	parts := strings.Split(name, "/")
	dfd, err := unix.Dup(rfd)
	if err != nil {
		return -1, err
	}
	for _, p := range parts[:len(parts)-1] {
		if p == ".." {
			unix.Close(dfd)
			return -1, unix.EXDEV
		}
		fd, err := openat(dfd, p, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dfd)
		if err != nil {
			return -1, err
		}
		dfd = fd
	}
	last := parts[len(parts)-1]
	if last == ".." {
		unix.Close(dfd)
		return -1, unix.EXDEV
	}
	fd, err := openat(dfd, last, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	unix.Close(dfd)
	return fd, err
}

func openat(dfd int, name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dfd, name, flag, perm)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// pathError names what failed; when a link was in the way, it names the
// link and where it points.
func pathError(root, name string, err error) error {
	full := filepath.Join(root, filepath.FromSlash(name))
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) {
		p := root
		for _, c := range strings.Split(path.Clean(name), "/") {
			p = filepath.Join(p, c)
			fi, lerr := os.Lstat(p)
			if lerr != nil {
				break
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				target, _ := os.Readlink(p)
				return &fs.PathError{Op: "open", Path: full, Err: fmt.Errorf("%s %w (to %s): tessera opens nothing in its state folder through a link; remove the link", p, ErrLink, target)}
			}
		}
		if errors.Is(err, unix.EXDEV) {
			return &fs.PathError{Op: "open", Path: full, Err: fmt.Errorf("%w: leaves %s", ErrLink, root)}
		}
	}
	return &fs.PathError{Op: "open", Path: full, Err: err}
}

// ReadFile reads root/name (OpenFile's rules).
func ReadFile(root, name string) ([]byte, error) {
	f, err := OpenFile(root, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// OpenDir opens the folder root/name (OpenFile's rules; "." is root) and
// refuses it, with an error wrapping ErrUnsafe, when it is not owned by
// the effective user or is writable by its group or others.
func OpenDir(root, name string) (*os.File, error) {
	f, err := OpenFile(root, name, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkOwn(f.Name(), f.Name(), fi, "folder")
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// MkdirAll creates the folder root/name and the folders on the way to it
// that are missing, with perm, without following links; each one, made
// or found, must pass OpenDir's check.
func MkdirAll(root, name string, perm fs.FileMode) error {
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return fmt.Errorf("create %s: %q must be a path inside %s", filepath.Join(root, name), name, root)
	}
	d, err := OpenDir(root, ".")
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Join(root, name), err)
	}
	defer func() { d.Close() }()
	p := root
	for _, c := range strings.Split(path.Clean(name), "/") {
		if c == "." {
			continue
		}
		p = filepath.Join(p, c)
		if err := unix.Mkdirat(int(d.Fd()), c, uint32(perm.Perm())); err != nil && err != unix.EEXIST {
			return fmt.Errorf("create %s: %w", p, err)
		}
		fd, err := openat(int(d.Fd()), c, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			rel, _ := filepath.Rel(root, p)
			return fmt.Errorf("create %s: %w", p, pathError(root, filepath.ToSlash(rel), err))
		}
		next := os.NewFile(uintptr(fd), p)
		fi, err := next.Stat()
		if err == nil {
			err = checkOwn(p, p, fi, "folder")
		}
		if err != nil {
			next.Close()
			return fmt.Errorf("create %s: %w", p, err)
		}
		d.Close()
		d = next
	}
	return nil
}

// Remove removes the file root/name (OpenFile's rules for the folder it
// is in; a link itself is removed, never followed). A missing file is
// not an error.
func Remove(root, name string) error {
	dir, base := path.Split(path.Clean(name))
	if dir == "" {
		dir = "."
	}
	d, err := OpenDir(root, dir)
	if err != nil {
		return fmt.Errorf("remove %s: %w", filepath.Join(root, name), err)
	}
	defer d.Close()
	if err := unix.Unlinkat(int(d.Fd()), base, 0); err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "remove", Path: filepath.Join(root, name), Err: err}
	}
	return nil
}

// WriteFile replaces root/name with data atomically and durably
// (atomicfile.WriteIn) in its folder, opened with OpenDir.
func WriteFile(root, name string, data []byte, perm fs.FileMode) error {
	return write(root, name, data, perm, atomicfile.WriteIn)
}

// ReplaceFile is WriteFile without the syncs (atomicfile.ReplaceIn): for
// a file a crash may lose.
func ReplaceFile(root, name string, data []byte, perm fs.FileMode) error {
	return write(root, name, data, perm, atomicfile.ReplaceIn)
}

func write(root, name string, data []byte, perm fs.FileMode, w func(*os.File, string, []byte, fs.FileMode) error) error {
	dir, base := path.Split(path.Clean(name))
	if dir == "" {
		dir = "."
	}
	d, err := OpenDir(root, dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(root, name), err)
	}
	defer d.Close()
	return w(d, base, data, perm)
}
