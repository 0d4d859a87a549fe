package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/internal/safefs"
)

// Report says what Recover did.
type Report struct {
	// KeptAside is where the old database was moved ("" when there was none).
	KeptAside string
	// FromMirror are jobs restored from the record in their folder,
	// FromDatabase those read from the old database (no usable mirror),
	// Rebuilt those whose record was lost (made from the folder's spec and
	// exit status, marked lost when it had no exit status).
	FromMirror, FromDatabase, Rebuilt []string
	// NextID is the ID the next job will get.
	NextID string
}

// Recover rebuilds the job database of stateDir from its job folders and
// whatever can still be read of the old database, which it keeps aside
// as jobs.db.damaged-TIME. It refuses while a daemon holds the database.
// Job IDs continue after the highest one seen anywhere.
func Recover(stateDir string, now time.Time) (Report, error) {
	var rep Report
	path := filepath.Join(stateDir, DBFile)
	if err := prepare(stateDir); err != nil {
		return rep, err
	}
	old := map[string]api.Job{}
	if _, err := os.Lstat(path); err == nil {
		if err := notHeld(path); err != nil {
			return rep, err
		}
		old = salvage(path)
		rep.KeptAside = fmt.Sprintf("%s.damaged-%s", path, now.UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, rep.KeptAside); err != nil {
			return rep, fmt.Errorf("keep the old job database aside: %w", err)
		}
	}
	folders, err := jobFolders(stateDir)
	if err != nil {
		return rep, err
	}
	jobs := map[string]api.Job{}
	var maxSeq uint64
	for _, f := range folders {
		maxSeq = max(maxSeq, f.seq)
		j, from := loadFolder(stateDir, f, old, now)
		jobs[f.id] = j
		switch from {
		case fromMirror:
			rep.FromMirror = append(rep.FromMirror, f.id)
		case fromDatabase:
			rep.FromDatabase = append(rep.FromDatabase, f.id)
		default:
			rep.Rebuilt = append(rep.Rebuilt, f.id)
		}
	}
	for id, j := range old {
		if _, ok := jobs[id]; !ok && j.ID == id && j.Seq > 0 {
			jobs[id] = j
			maxSeq = max(maxSeq, j.Seq)
			rep.FromDatabase = append(rep.FromDatabase, id)
		} else {
			maxSeq = max(maxSeq, j.Seq)
		}
	}
	removeStaleTemps(stateDir, folders, jobs, slog.Default())
	db, err := openBolt(path, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return rep, fmt.Errorf("create job database %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketJobs)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if err := put(b, j); err != nil {
				return err
			}
		}
		return b.SetSequence(maxSeq)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("rebuild job database %s: %w", path, err)
	}
	for id, j := range jobs {
		if j.State != api.Running {
			if err := endOrphans(JobDir(stateDir, id)); err != nil {
				return rep, fmt.Errorf("end the processes of %s (%s, not running by its record): %w", id, j.State, err)
			}
		}
	}
	rep.NextID = fmt.Sprintf("job-%d", maxSeq+1)
	return rep, nil
}

// notHeld fails when a daemon has the database open (bbolt holds an
// exclusive flock on it while open).
func notHeld(path string) error {
	f, err := safefs.OpenFile(filepath.Dir(path), filepath.Base(path), os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s is in use by a running tessera daemon: stop it first", path)
		}
		return fmt.Errorf("lock %s: %w", path, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// salvage reads what it can of a possibly damaged database: nothing when
// bbolt cannot open or walk it.
func salvage(path string) (out map[string]api.Job) {
	out = map[string]api.Job{}
	// A fault on a page beyond the end of a truncated file is a panic
	// here, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		// A damaged page: keep what was read before it. (bbolt leaves the
		// file mapped; it is moved aside next.)
		_ = recover()
	}()
	db, err := openBolt(path, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return out
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var j api.Job
			if json.Unmarshal(v, &j) == nil && j.ID == string(k) {
				out[j.ID] = j
			}
			return nil
		})
	})
	return out
}

// Where loadFolder found a job's record.
const (
	fromMirror = iota
	fromDatabase
	rebuilt
)

// loadFolder returns the record of job folder f of stateDir: its mirror
// when that is a record of this job, else its record in the old
// database, else one rebuilt from the folder's spec and exit status.
func loadFolder(stateDir string, f folder, old map[string]api.Job, now time.Time) (api.Job, int) {
	dir := JobDir(stateDir, f.id)
	if j, err := readMirror(dir); err == nil && validRecord(j, f) {
		return j, fromMirror
	}
	if j, ok := old[f.id]; ok {
		return j, fromDatabase
	}
	return rebuild(dir, f, now), rebuilt
}

// validRecord reports whether j can be folder f's record: its ID and
// sequence number are the folder's and its state is one a job can be in.
func validRecord(j api.Job, f folder) bool {
	switch j.State {
	case api.Queued, api.Running, api.Succeeded, api.Failed, api.Stopped, api.Lost, api.Preempted:
	default:
		return false
	}
	return j.ID == f.id && j.Seq == f.seq
}

func readMirror(dir string) (api.Job, error) {
	data, err := safefs.ReadFile(filepath.Dir(dir), filepath.Base(dir)+"/"+RecordFile)
	if err != nil {
		return api.Job{}, err
	}
	var j api.Job
	if err := json.Unmarshal(data, &j); err != nil {
		return api.Job{}, err
	}
	return j, nil
}

// rebuild makes a record for a folder whose record is lost, from the
// supervisor's files in it (the command from its spec, how it ended from
// its exit status). Its GPU request is not known; it is never run again.
func rebuild(dir string, f folder, now time.Time) api.Job {
	fin := now.UTC()
	j := api.Job{ID: f.id, Seq: f.seq, Queue: "default", State: api.Lost, Submitted: fin, Finished: &fin,
		Reason: "rebuilt by recovery from the job folder: its record was lost"}
	if spec, err := supervisor.ReadSpec(dir); err == nil {
		j.Command, j.Dir = spec.Command, spec.Dir
	}
	if e, ok, err := supervisor.ReadExit(dir); err == nil && ok {
		code, fin := e.Code, e.Finished
		j.ExitCode, j.Finished = &code, &fin
		j.State = api.Succeeded
		if code != 0 {
			j.State = api.Failed
		}
		j.Reason = e.Reason + " (record rebuilt by recovery from the job folder)"
	}
	return j
}

// endOrphans ends the processes of a job that is not running by its
// recovered record (a lost record, or a mirror older than the job's
// start): no share is booked for them, so none may run.
func endOrphans(dir string) error {
	spec, err := supervisor.ReadSpec(dir)
	if err != nil {
		return nil // never started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := spec.Contain.Kill(ctx); err != nil {
		return err
	}
	return spec.Contain.Remove()
}
