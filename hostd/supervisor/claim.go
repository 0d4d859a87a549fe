package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/internal/safefs"
)

// A run's claim decides, once and for all, whether a supervisor started
// for it may run the job. The daemon records a job as starting (running,
// no supervisor yet) before it starts the supervisor and records the
// supervisor after; a daemon that dies between the two leaves a job whose
// supervisor may or may not exist. The claim settles it without a race:
// the supervisor claims the run before it starts the job, a recovering
// daemon cancels it, and whichever comes first wins (the file is created
// by link(2), which fails if it exists). A cancelled run is queued again
// and never started by its late supervisor; a claimed one is adopted.

// ClaimFile is the claim of run n of a job, in the job's folder.
func ClaimFile(jobDir string, run int) string {
	return filepath.Join(jobDir, fmt.Sprintf("run-%d.claim", run))
}

// cancelledClaim is the content of a claim made by a recovering daemon.
const cancelledClaim = "cancelled\n"

// Claimed is what a claim file holds.
type Claimed struct {
	// Cancelled: a recovering daemon took the run before any supervisor;
	// the job was queued again.
	Cancelled bool
	// PID and Start identify the supervisor that claimed the run.
	PID   int
	Start uint64
}

// ErrClaimed is returned when a claim is already made; ReadClaim says by whom.
var ErrClaimed = errors.New("run already claimed")

// claimAs creates path with content, failing with ErrClaimed if it exists.
// The job folder is opened without following links (internal/safefs), and
// the claim is made in it by linkat(2).
func claimAs(path, content string) error {
	root, rel := inJobs(path)
	d, err := safefs.OpenDir(root, filepath.Base(filepath.Dir(path)))
	if err != nil {
		return fmt.Errorf("claim run: %w", err)
	}
	defer d.Close()
	dfd := int(d.Fd())
	tmpName := fmt.Sprintf(".claim-%d-%s", os.Getpid(), filepath.Base(path))
	_ = unix.Unlinkat(dfd, tmpName, 0) // one a crash of this pid left
	fd, err := unix.Openat(dfd, tmpName, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("claim run: %w", &fs.PathError{Op: "create", Path: filepath.Join(filepath.Dir(path), tmpName), Err: err})
	}
	defer unix.Unlinkat(dfd, tmpName, 0)
	tmp := os.NewFile(uintptr(fd), filepath.Join(filepath.Dir(path), tmpName))
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return fmt.Errorf("claim run: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("claim run: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("claim run: %w", err)
	}
	if err := unix.Linkat(dfd, tmpName, dfd, filepath.Base(rel), 0); err != nil {
		if err == unix.EEXIST {
			return ErrClaimed
		}
		return fmt.Errorf("claim run: %w", &fs.PathError{Op: "link", Path: path, Err: err})
	}
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(path), err)
	}
	return nil
}

// Claim claims the run for the calling supervisor (pid and start time).
func Claim(path string, pid int, start uint64) error {
	return claimAs(path, fmt.Sprintf("%d %d\n", pid, start))
}

// Cancel claims the run for a recovering daemon: no supervisor may run it.
func Cancel(path string) error { return claimAs(path, cancelledClaim) }

// ReadClaim reads a claim; ok is false when the run is not claimed.
func ReadClaim(path string) (c Claimed, ok bool, err error) {
	root, rel := inJobs(path)
	data, err := safefs.ReadFile(root, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return Claimed{}, false, nil
	}
	if err != nil {
		return Claimed{}, false, fmt.Errorf("read claim: %w", err)
	}
	if string(data) == cancelledClaim {
		return Claimed{Cancelled: true}, true, nil
	}
	f := strings.Fields(string(data))
	if len(f) == 2 {
		pid, perr := strconv.Atoi(f[0])
		start, serr := strconv.ParseUint(f[1], 10, 64)
		if perr == nil && serr == nil && pid > 0 {
			return Claimed{PID: pid, Start: start}, true, nil
		}
	}
	return Claimed{}, false, fmt.Errorf("claim %s: unreadable content %q", path, data)
}
