package hostd

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/internal/safefs"
)

// A job's accounting folder (TESSERA_SHM_DIR) holds the file its
// interception library counts memory in and the arbiter's grant region;
// the job must be able to create files in it. For a job that runs as the
// daemon's user it is JOBDIR/shm. A root daemon running a job as another
// user cannot give it a folder inside the owner-only state folder (the
// user could not reach it, and must not be able to change the state
// folder), so that job's folder is RuntimeDir/JOB, owned by the job's
// user, under folders only root may write (RuntimeDir defaults to
// /run/tessera/<digest of the state folder's path>, on tmpfs). It is
// removed when the job ends, and RuntimeDir when the daemon closes with
// no job folder left in it; a crashed daemon's is reused by the next one
// on the same state folder. /run/tessera stays: every root daemon on the
// host shares it, and removing it could pull it from under another
// daemon's job start.

// DefaultRuntimeRoot is where a root daemon makes RuntimeDir by default.
const DefaultRuntimeRoot = "/run/tessera"

// defaultRuntimeDir is RuntimeDir for stateDir: one folder per state
// folder, so daemons side by side keep apart.
func defaultRuntimeDir(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(DefaultRuntimeRoot, hex.EncodeToString(sum[:8]))
}

// checkRuntimeDir makes a RuntimeDir given in c absolute and refuses one
// whose parent exists and is not already what prepareShm makes of it
// (mode 0711): prepareShm would take that folder over, and /run, say,
// would become unlistable to its users.
func checkRuntimeDir(c *Config) error {
	abs, err := filepath.Abs(c.RuntimeDir)
	if err != nil {
		return fmt.Errorf("runtime dir %s: %w", c.RuntimeDir, err)
	}
	c.RuntimeDir = abs
	if os.Geteuid() != 0 {
		return nil // only root runs jobs as others (prepareShm)
	}
	parent := filepath.Dir(abs)
	fi, err := os.Lstat(parent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("runtime dir %s: %w", abs, err)
	case !fi.IsDir() || fi.Mode().Perm() != 0o711:
		return fmt.Errorf("runtime dir %s: its parent %s (mode %s) must be missing (the daemon makes it) or a folder of mode 0711 it made before: the daemon sets that mode on it; give a runtime dir under a folder of its own, such as %s/NAME", abs, parent, fi.Mode(), DefaultRuntimeRoot+"-NAME")
	}
	return nil
}

// otherUser reports whether a job run as user runs as another user than
// the daemon's.
func (d *Daemon) otherUser(user *supervisor.User) bool {
	return user != nil && int(user.UID) != d.euid
}

// prepareShm makes job j's accounting folder for a run as user, and
// returns it.
func (d *Daemon) prepareShm(j api.Job, user *supervisor.User) (string, error) {
	if !d.otherUser(user) {
		shm := filepath.Join(d.JobDir(j.ID), "shm")
		if err := os.MkdirAll(shm, 0o700); err != nil {
			return "", fmt.Errorf("accounting folder: %w", err)
		}
		return shm, nil
	}
	root := d.cfg.RuntimeDir
	// Every folder above the job's is root's and only root may write it:
	// the job's user may enter (0711), not add or rename entries.
	for _, dir := range []string{filepath.Dir(root), root} {
		if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("accounting folder: %w", err)
		}
		if err := safefs.CheckStateDir(dir, "accounting folder"); err != nil {
			return "", err
		}
		if err := os.Chmod(dir, 0o711); err != nil {
			return "", fmt.Errorf("accounting folder: %w", err)
		}
	}
	shm := filepath.Join(root, j.ID)
	// A folder from an earlier run (a restartable job started again) or
	// an earlier daemon goes: what is in it was the job user's to change.
	if err := os.RemoveAll(shm); err != nil {
		return "", fmt.Errorf("accounting folder: %w", err)
	}
	if err := os.Mkdir(shm, 0o700); err != nil {
		return "", fmt.Errorf("accounting folder: %w", err)
	}
	if err := os.Chown(shm, int(user.UID), int(user.GID)); err != nil {
		return "", fmt.Errorf("accounting folder: %w", err)
	}
	return shm, nil
}

// shmOf is job j's accounting folder as its start recorded it.
func (d *Daemon) shmOf(j api.Job) string {
	if j.ShmDir != "" {
		return j.ShmDir
	}
	return filepath.Join(d.JobDir(j.ID), "shm")
}

// dropShm removes j's accounting folder when it is outside the state
// folder (the job ran as another user); one in the job folder stays with
// the job's other files.
func (d *Daemon) dropShm(j api.Job) {
	if j.ShmDir == "" || filepath.Dir(j.ShmDir) != d.cfg.RuntimeDir {
		return
	}
	if err := os.RemoveAll(j.ShmDir); err != nil {
		d.cfg.Log.Warn("remove the job's accounting folder", "job", j.ID, "folder", j.ShmDir, "err", err)
	}
}

// dropRuntimeDir removes RuntimeDir if it is empty: one that holds the
// folders of jobs still running stays for the next daemon, which removes
// them as the jobs end.
func (d *Daemon) dropRuntimeDir() {
	// A link the operator put there is theirs (prepareShm follows it).
	if fi, err := os.Lstat(d.cfg.RuntimeDir); err != nil || !fi.IsDir() {
		return
	}
	err := os.Remove(d.cfg.RuntimeDir)
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return
	}
	d.cfg.Log.Warn("remove the daemon's runtime folder", "folder", d.cfg.RuntimeDir, "err", err)
}
