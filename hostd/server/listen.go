package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// MaxSocketPath is the longest unix socket path Linux takes, in bytes:
// sockaddr_un's sun_path holds 108, the terminating NUL included.
const MaxSocketPath = 107

// CheckSocketPath refuses a socket path too long for a unix socket, which
// bind would refuse with a bare "invalid argument".
func CheckSocketPath(path string) error {
	if len(path) > MaxSocketPath {
		return fmt.Errorf("--socket %s: the path is %d bytes, and a unix socket path may be at most %d bytes on Linux (%d including the terminating NUL); give --socket a shorter path (the default, STATE_DIR/tessera.sock, is as long as --state-dir allows)",
			path, len(path), MaxSocketPath, MaxSocketPath+1)
	}
	return nil
}

// ListenUnix listens on the unix socket path with the given mode. A stale
// socket file left by a dead daemon is replaced; a live one is an error.
func ListenUnix(path string, mode os.FileMode) (net.Listener, error) {
	if err := CheckSocketPath(path); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("--socket %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("--socket %s: another tessera daemon is serving it (use a different --socket and --state-dir)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("--socket %s: remove stale socket: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("--socket %s: chmod %o: %w", path, mode, err)
	}
	return l, nil
}

// PrepareSocketDir makes the socket's folders match --socket-mode before
// the socket is created, and returns what it changed, for the log.
//
// Connecting to a unix socket needs write permission on it and search
// permission on every folder on its path. When mode lets the socket's
// group or others connect (0660, 0666) and the socket lies directly in
// the state folder, the state folder gets the search bit, and only that,
// for those classes (0710, 0711: they can traverse it to the socket, not
// list it), and every other entry in it is made owner-only, so that
// nothing else in it leaks; with an owner-only mode a state folder this
// function opened goes back to 0700. Any other folder on the way is left
// as it is, and a mode that one of them would defeat is refused, saying
// which folder and what to do.
func PrepareSocketDir(stateDir, socket string, mode fs.FileMode) ([]string, error) {
	stateDir, socket = filepath.Clean(stateDir), filepath.Clean(socket)
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--socket %s: %w", socket, err)
	}
	// The search bits the folders on the way must grant.
	var search fs.FileMode
	if mode&0o020 != 0 {
		search |= 0o010
	}
	if mode&0o002 != 0 {
		search |= 0o001
	}
	var notes []string
	if search == 0 && mode&0o066 != 0 {
		notes = append(notes, fmt.Sprintf("--socket-mode %04o lets group or others read the socket but not write it; connecting needs write, so only its owner can connect (0660 or 0666 open it)", mode))
	}
	from := dir
	if dir == stateDir {
		n, err := openStateDir(stateDir, socket, mode, search)
		if err != nil {
			return nil, err
		}
		notes = append(notes, n...)
		from = filepath.Dir(dir)
	}
	if search != 0 {
		if err := checkSearchable(from, socket, mode, search); err != nil {
			return nil, err
		}
	}
	return notes, nil
}

// openStateDir gives the state folder exactly the search bits the socket
// needs for group and others (no read, no write), and makes every other
// entry in it owner-only when it is opened.
func openStateDir(stateDir, socket string, mode, search fs.FileMode) ([]string, error) {
	fi, err := os.Stat(stateDir)
	if err != nil {
		return nil, fmt.Errorf("--state-dir %s: %w", stateDir, err)
	}
	perm := fi.Mode().Perm()
	want := perm&^0o077 | search
	if search == 0 && perm&0o077&^0o011 != 0 {
		// Read or write for group or others: the user's own choice, not
		// what this function sets; leave it.
		want = perm
	}
	var notes []string
	if want != perm {
		if search != 0 && perm&0o022 != 0 {
			return nil, fmt.Errorf("--socket-mode %04o: the state folder %s is writable by group or others (mode %04o), so they could replace the daemon's files; use a state folder of its own (--state-dir)", mode, stateDir, perm)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("--socket-mode %04o: the state folder %s (mode %04o) belongs to uid %d, not to this daemon's user (uid %d), so tessera will not change its mode; use a state folder of its own (--state-dir)", mode, stateDir, perm, st.Uid, os.Geteuid())
		}
		if err := os.Chmod(stateDir, fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)|want); err != nil {
			return nil, fmt.Errorf("--socket-mode %04o: state folder %s: %w", mode, stateDir, err)
		}
		if search != 0 {
			notes = append(notes, fmt.Sprintf("state folder %s is now %04o (was %04o) for --socket-mode %04o: %s may traverse it to reach the socket, not list it; everything else in it stays owner-only", stateDir, want, perm, mode, classes(search)))
		} else {
			notes = append(notes, fmt.Sprintf("state folder %s is back to %04o (was %04o): --socket-mode %04o lets only the owner connect", stateDir, want, perm, mode))
		}
	}
	if search == 0 {
		return notes, nil
	}
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return nil, fmt.Errorf("--state-dir %s: %w", stateDir, err)
	}
	for _, e := range entries {
		path := filepath.Join(stateDir, e.Name())
		if path == socket || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("--state-dir %s: %w", stateDir, err)
		}
		p := info.Mode().Perm()
		if p&0o077 == 0 {
			continue
		}
		if err := os.Chmod(path, info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)|p&^0o077); err != nil {
			return nil, fmt.Errorf("--socket-mode %04o: make %s owner-only: %w", mode, path, err)
		}
		notes = append(notes, fmt.Sprintf("%s is now %04o (was %04o): the state folder can be traversed, so what is in it must be owner-only", path, p&^0o077, p))
	}
	return notes, nil
}

// checkSearchable refuses mode when a folder from dir up to the root does
// not let the classes in search traverse it to the socket.
func checkSearchable(dir, socket string, mode, search fs.FileMode) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("--socket %s: %w", socket, err)
	}
	// The socket's group: the folder's when it is setgid, else ours.
	gid := uint32(os.Getegid())
	if fi, err := os.Stat(filepath.Dir(socket)); err == nil && fi.Mode()&fs.ModeSetgid != 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			gid = st.Gid
		}
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("--socket %s: %w", socket, err)
		}
		perm := fi.Mode().Perm()
		var fuid, fgid uint32
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			fuid, fgid = st.Uid, st.Gid
		}
		var blocked fs.FileMode
		if search&0o001 != 0 && perm&0o001 == 0 {
			blocked |= 0o001
		}
		if search&0o010 != 0 && perm&0o001 == 0 && (fgid != gid || perm&0o010 == 0) {
			blocked |= 0o010
		}
		if blocked != 0 {
			return fmt.Errorf("--socket-mode %04o: %s could not reach %s: folder %s (mode %04o, owner uid %d, group gid %d) does not let them search it; "+
				"put the socket in a folder they can traverse (--socket), leave it in the state folder (tessera opens that one for traversal only) with a state folder whose parents they can traverse, "+
				"run chmod %s+x %s yourself if that is safe, or keep --socket-mode 0600",
				mode, classes(blocked), socket, d, perm, fuid, fgid, classLetters(blocked), d)
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

// classes names the permission classes whose search bits are in bits.
func classes(bits fs.FileMode) string {
	switch bits & 0o011 {
	case 0o010:
		return "the socket's group"
	case 0o001:
		return "other users"
	}
	return "the socket's group and other users"
}

func classLetters(bits fs.FileMode) string {
	switch bits & 0o011 {
	case 0o010:
		return "g"
	case 0o001:
		return "o"
	}
	return "go"
}
