package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tessera-gpu/tessera/hostd/contain"
	"github.com/tessera-gpu/tessera/internal/safefs"
)

// File names inside a job's folder.
const (
	SpecFile       = "spec.json"
	ExitFile       = "exit.json"
	StdoutFile     = "stdout.log"
	StderrFile     = "stderr.log"
	SupervisorFile = "supervisor.log"
)

// Spec is what the supervisor runs.
type Spec struct {
	Command []string `json:"command"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir,omitempty"`
	// StopGrace is how long the job has between the first SIGTERM or
	// SIGINT and SIGKILL; 0 means never escalate.
	StopGrace time.Duration `json:"stopGrace,omitempty"`
	// Contain says where the job's processes are kept (its cgroup and
	// environment mark): every one of them is ended before the exit is
	// recorded, and a daemon finds them from here if the supervisor dies.
	Contain contain.Job `json:"contain"`
	// Claim is the run's claim file (ClaimFile): the supervisor starts the
	// job only if it claims the run first. Empty: no claim (older specs).
	Claim string `json:"claim,omitempty"`
	// User is whom the job runs as (see User); nil: the supervisor's own
	// user.
	User *User `json:"user,omitempty"`
}

// Exit is the recorded outcome of a job.
type Exit struct {
	// Code is the exit code, 128+N when killed by signal N, 127 when the
	// command could not be started.
	Code     int       `json:"code"`
	Reason   string    `json:"reason"`
	Finished time.Time `json:"finished"`
}

// WriteJSON writes v to path, a file in a job folder, atomically and
// durably (atomicfile), never through a link: path's folder is opened
// relative to its parent without following links (internal/safefs).
func WriteJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	root, name := inJobs(path)
	return safefs.WriteFile(root, name, data, 0o600)
}

func readJSON(path string, v any) error {
	root, name := inJobs(path)
	data, err := safefs.ReadFile(root, name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// inJobs splits path, a file in a job folder, into the folder holding the
// job folders and the rest ("job-1/exit.json"): what is opened beneath
// the first without following links.
func inJobs(path string) (root, name string) {
	dir, file := filepath.Split(filepath.Clean(path))
	dir = filepath.Clean(dir)
	return filepath.Dir(dir), filepath.Base(dir) + "/" + file
}

// CheckJobDir refuses a job folder that another user could change, or
// that is a link: the folder must be this user's own and writable by no
// one else, and so must the folder holding it, whose parents must belong
// to root or this user and be writable by no one else unless sticky
// (internal/safefs).
func CheckJobDir(jobDir string) error {
	jobs := filepath.Dir(filepath.Clean(jobDir))
	if err := safefs.CheckStateDir(jobs, "jobs folder"); err != nil {
		return err
	}
	d, err := safefs.OpenDir(jobs, filepath.Base(jobDir))
	if err != nil {
		return fmt.Errorf("job folder: %w", err)
	}
	return d.Close()
}

// openLog opens the log file name of jobDir for appending, creating it
// owner-only, never through a link.
func openLog(jobDir, name string) (*os.File, error) {
	root, rel := inJobs(filepath.Join(jobDir, name))
	return safefs.OpenFile(root, rel, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// exitReserve, in a job folder, is room set aside for the exit status
// while the job runs (reserveExit), exitReserveSize bytes of it.
const (
	exitReserve     = ".exit.json.reserve"
	exitReserveSize = 8192
)

// reserveExit sets aside room in jobDir for the exit status, so that a
// job that fills the disk still gets its exit status recorded. Best
// effort: without it the exit status is written as usual.
func reserveExit(jobDir string) {
	root, name := inJobs(filepath.Join(jobDir, exitReserve))
	f, err := safefs.OpenFile(root, name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, exitReserveSize)); err == nil {
		_ = f.Sync()
	}
}

// writeExit records e as jobDir's exit status. When the job folder's
// file system is full the reason says so (the job's output may be cut
// short) and the room reserveExit set aside is used; an exit status that
// cannot be written is an error saying why, which the supervisor reports
// in its log for the daemon (WhyNoExit).
func writeExit(jobDir string, e Exit) error {
	if full := diskFull(jobDir); full != "" {
		e.Reason += "; " + full
	}
	root, reserve := inJobs(filepath.Join(jobDir, exitReserve))
	err := WriteJSON(filepath.Join(jobDir, ExitFile), e)
	if err != nil && (errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)) {
		if rerr := writeReserved(jobDir, e); rerr == nil {
			return nil
		}
	}
	_ = safefs.Remove(root, reserve)
	if err != nil {
		return fmt.Errorf("record the exit status (%s): %w", e.Reason, err)
	}
	return nil
}

// writeReserved writes e into the room reserveExit set aside (its pages
// are already the file's: overwriting them takes no more space) and
// renames it to the exit status.
func writeReserved(jobDir string, e Exit) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if len(data) > exitReserveSize {
		keep := max(len(e.Reason)-(len(data)-exitReserveSize)-64, 0)
		e.Reason = strings.ToValidUTF8(e.Reason[:keep], "") + "..."
		if data, err = json.Marshal(e); err != nil || len(data) > exitReserveSize {
			return fmt.Errorf("exit status too long for the reserved room")
		}
	}
	root, name := inJobs(filepath.Join(jobDir, exitReserve))
	f, err := safefs.OpenFile(root, name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	d, err := safefs.OpenDir(root, filepath.Base(filepath.Clean(jobDir)))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Renameat(int(d.Fd()), exitReserve, int(d.Fd()), ExitFile); err != nil {
		return err
	}
	return d.Sync()
}

// diskFull says that the file system of dir is full, or "" when it is
// not (or cannot be told).
func diskFull(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return ""
	}
	switch {
	case st.Blocks > 0 && st.Bavail == 0:
		return fmt.Sprintf("the file system of the job folder %s is full (%s): the job's output may be cut short", dir, unix.ENOSPC)
	case st.Files > 0 && st.Ffree == 0:
		return fmt.Sprintf("the file system of the job folder %s has no free inodes (%s)", dir, unix.ENOSPC)
	}
	return ""
}

// superviseLogPrefix starts the lines the supervisor writes about itself
// to its log (SupervisorFile).
const superviseLogPrefix = "tessera supervise: "

// WhyNoExit says why the job in jobDir may have ended without an exit
// status: the supervisor's last complaint in its log, and a full file
// system; "" when neither is found.
func WhyNoExit(jobDir string) string {
	var why []string
	root, name := inJobs(filepath.Join(jobDir, SupervisorFile))
	if f, err := safefs.OpenFile(root, name, os.O_RDONLY, 0); err == nil {
		const tail = 4096
		if fi, err := f.Stat(); err == nil && fi.Size() > tail {
			_, _ = f.Seek(fi.Size()-tail, io.SeekStart)
		}
		data, _ := io.ReadAll(io.LimitReader(f, tail))
		f.Close()
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if msg, ok := strings.CutPrefix(lines[i], superviseLogPrefix); ok {
				why = append(why, "the supervisor said: "+msg)
				break
			}
		}
	}
	if full := diskFull(jobDir); full != "" {
		why = append(why, full)
	}
	return strings.Join(why, "; ")
}

// ReadSpec returns the spec recorded in jobDir.
func ReadSpec(jobDir string) (Spec, error) {
	var s Spec
	if err := readJSON(filepath.Join(jobDir, SpecFile), &s); err != nil {
		return Spec{}, fmt.Errorf("read job spec: %w", err)
	}
	return s, nil
}

// ReadExit returns the recorded exit of the job in jobDir; ok is false when
// none was recorded.
func ReadExit(jobDir string) (e Exit, ok bool, err error) {
	err = readJSON(filepath.Join(jobDir, ExitFile), &e)
	if errors.Is(err, fs.ErrNotExist) {
		return Exit{}, false, nil
	}
	if err != nil {
		return Exit{}, false, fmt.Errorf("read exit status: %w", err)
	}
	return e, true, nil
}
