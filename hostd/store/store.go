package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/internal/safefs"
)

// Names inside a state folder.
const (
	// DBFile is the job database.
	DBFile = "jobs.db"
	// JobsDir holds one folder per job, named by its ID.
	JobsDir = "jobs"
	// RecordFile, in a job's folder, mirrors the job's database record.
	RecordFile = "record.json"
)

var bucketJobs = []byte("jobs")

// ErrNotFound is returned (wrapped) for an unknown job ID.
var ErrNotFound = errors.New("no such job")

// ErrDamaged is returned (wrapped, by Open) when the job database is
// unreadable, damaged, or does not match the job folders beside it.
// Nothing was changed; Recover rebuilds the database.
var ErrDamaged = errors.New("the job database is damaged or does not match the job folders")

// Store is the job database of one state folder, with a mirror of every
// record in its job's folder (what Recover rebuilds the database from).
type Store struct {
	db  *bolt.DB
	dir string
	log *slog.Logger
	// mu orders writes: their mirrors (one temporary name per job) and
	// PutUnsynced's switch of the database's sync flag.
	mu sync.Mutex
	// pending are new jobs' mirrors not written yet: Create leaves its
	// mirror (and the job's folder) to the mirror writer, off the
	// submission's path; a Put of the job writes its own and drops it.
	pending map[string]api.Job
	// requests maps requestKey(owner, request ID) to the job it made.
	requests map[string]string
	kick     chan struct{}
	stopped  chan struct{}
}

// JobDir is the folder of job id in stateDir.
func JobDir(stateDir, id string) string { return filepath.Join(stateDir, JobsDir, id) }

// Open opens (creating) the job database of stateDir. It fails after a
// second when another daemon holds it, and with an error wrapping
// ErrDamaged when the database cannot be trusted: a file bbolt cannot
// read or whose structure is inconsistent, a damaged header (meta page),
// or job folders the database has no record of (a missing, emptied or
// rolled-back database: starting would reuse their IDs).
func Open(stateDir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := prepare(stateDir); err != nil {
		return nil, err
	}
	path := filepath.Join(stateDir, DBFile)
	folders, err := jobFolders(stateDir)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0):
		if len(folders) > 0 {
			what := "missing"
			if err == nil {
				what = "empty"
			}
			return nil, damaged(path, fmt.Sprintf("it is %s, but %d job folders exist (%s ... %s): starting would reuse their IDs", what, len(folders), folders[0].id, folders[len(folders)-1].id))
		}
	case err != nil:
		return nil, fmt.Errorf("open job store %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("open job store %s: %w", path, notRegular(fi))
	default:
		if err := checkMeta(path, fi.Size()); err != nil {
			return nil, damaged(path, err.Error())
		}
	}
	db, err := openChecked(path)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, dir: stateDir, log: log, pending: map[string]api.Job{}, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	if err := s.matchFolders(folders); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.indexRequests(); err != nil {
		_ = db.Close()
		return nil, err
	}
	go s.mirrorPending()
	return s, nil
}

func damaged(path, problem string) error {
	return fmt.Errorf("%w: %s: %s", ErrDamaged, path, problem)
}

// openChecked opens the database after checking a copy of it: bbolt's
// own consistency check walks every page, with its panics on bad pages
// turned into errors. A copy, because after such a panic bbolt leaves the
// file mapped and locked, and the real file must stay free for recovery.
func openChecked(path string) (*bolt.DB, error) {
	if err := checkCopy(path); err != nil {
		return nil, err
	}
	db, err := openBolt(path, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("open job store %s: locked by another tessera daemon (use a different --state-dir)", path)
		}
		return nil, fmt.Errorf("open job store %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketJobs)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("init job store %s: %w", path, err)
	}
	return db, nil
}

// checkCopy runs the checks on a private copy of the database at path
// (absent or empty: nothing to check).
func checkCopy(path string) (err error) {
	src, err := safefs.OpenFile(filepath.Dir(path), filepath.Base(path), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open job store %s: %w", path, err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".check-*.db")
	if err != nil {
		return fmt.Errorf("check job store %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("check job store %s: copy: %w", path, err)
	}
	if fi, err := os.Stat(tmp.Name()); err != nil || fi.Size() == 0 {
		return err
	}
	// bbolt reads the file through a memory map: a page it believes in
	// beyond the end of the file faults, which must be a panic here.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damaged(path, fmt.Sprintf("unreadable (%v)", r))
		}
	}()
	db, err := bolt.Open(tmp.Name(), 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return damaged(path, err.Error())
	}
	defer db.Close()
	var problems []error
	var bad error
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			// bbolt reports a failed assertion as "panic: ...": it is
			// caught, and a damaged page is what it means here.
			problems = append(problems, errors.New(strings.TrimPrefix(e.Error(), "panic: ")))
		}
		if len(problems) > 0 {
			return nil
		}
		b := tx.Bucket(bucketJobs)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var j api.Job
			if err := json.Unmarshal(v, &j); err != nil || j.ID != string(k) {
				bad = fmt.Errorf("record %q does not decode as a job", k)
				return bad
			}
			return nil
		})
	})
	switch {
	case len(problems) > 0:
		return damaged(path, fmt.Sprintf("consistency check: %v", errors.Join(problems...)))
	case err != nil:
		return damaged(path, err.Error())
	}
	return nil
}

// matchFolders refuses a database that has no record of a job folder
// (job IDs would be reused) and brings every folder's record mirror up to
// date (a crash may fall between a commit and its mirror).
func (s *Store) matchFolders(folders []folder) error {
	path := filepath.Join(s.dir, DBFile)
	var seq uint64
	have := map[string]api.Job{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		seq = b.Sequence()
		return b.ForEach(func(k, v []byte) error {
			var j api.Job
			if err := json.Unmarshal(v, &j); err != nil {
				return err
			}
			have[string(k)] = j
			return nil
		})
	}); err != nil {
		return damaged(path, err.Error())
	}
	var missing []string
	for _, f := range folders {
		if _, ok := have[f.id]; !ok {
			missing = append(missing, f.id)
		}
	}
	if len(missing) > 0 {
		return damaged(path, fmt.Sprintf("it has no record of %d job folder(s) (%s): it is older than the folders (rolled back, or restored from a copy), and starting would reuse their IDs", len(missing), summarize(missing)))
	}
	if n := len(folders); n > 0 && folders[n-1].seq > seq {
		return damaged(path, fmt.Sprintf("its job sequence is %d but folder %s exists: starting would reuse IDs", seq, folders[n-1].id))
	}
	for _, j := range have {
		s.mirror(j, true)
	}
	removeStaleTemps(s.dir, folders, have, s.log)
	return nil
}

func summarize(ids []string) string {
	if len(ids) <= 5 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v and %d more", ids[:5], len(ids)-5)
}

// mirror writes j's record into its folder (atomically; not synced: the
// database is the durable copy, the mirror what recovery starts from).
// With onlyIfStale it leaves an equal mirror alone.
func (s *Store) mirror(j api.Job, onlyIfStale bool) {
	data, err := json.Marshal(j)
	if err != nil {
		s.log.Error("mirror job record", "job", j.ID, "err", err)
		return
	}
	rel := JobsDir + "/" + j.ID
	if onlyIfStale {
		if old, err := safefs.ReadFile(s.dir, rel+"/"+RecordFile); err == nil && string(old) == string(data) {
			return
		}
	}
	err = writeMirror(s.dir, rel, data)
	if errors.Is(err, fs.ErrNotExist) {
		if err = safefs.MkdirAll(s.dir, rel, 0o700); err == nil {
			err = writeMirror(s.dir, rel, data)
		}
	}
	if err != nil {
		s.log.Error("mirror job record", "job", j.ID, "err", err)
	}
}

// indexRequests reads every job's request ID into s.requests: the records
// are where request IDs are kept, so recovery rebuilds them too.
func (s *Store) indexRequests() error {
	jobs, err := s.List()
	if err != nil {
		return err
	}
	s.requests = map[string]string{}
	for _, j := range jobs {
		if j.RequestID != "" {
			s.requests[requestKey(j.OwnerUID, j.RequestID)] = j.ID
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	close(s.kick)
	<-s.stopped
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close job store: %w", err)
	}
	return nil
}

// Create gives j the next sequence number and an ID ("job-<seq>"),
// stores it and creates its folder; it returns the stored record. An ID
// whose folder exists already is never given again.
func (s *Store) Create(j api.Job) (api.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		for {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			j.Seq, j.ID = seq, fmt.Sprintf("job-%d", seq)
			// Open refuses folders beyond the sequence; one made since is
			// skipped over, never reused.
			if _, err := os.Lstat(JobDir(s.dir, j.ID)); errors.Is(err, fs.ErrNotExist) {
				return put(b, j)
			}
		}
	})
	if err != nil {
		return api.Job{}, fmt.Errorf("create job: %w", err)
	}
	s.pending[j.ID] = j
	if j.RequestID != "" {
		s.requests[requestKey(j.OwnerUID, j.RequestID)] = j.ID
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return j, nil
}

// requestKey is the key of a submission's request ID: request IDs are
// the submitting user's, so one user's cannot name another's job.
func requestKey(owner *uint32, id string) string {
	if owner == nil {
		return "-/" + id
	}
	return fmt.Sprintf("%d/%s", *owner, id)
}

// ByRequest returns the job owner submitted with request ID id, if any
// (false for id "").
func (s *Store) ByRequest(owner *uint32, id string) (api.Job, bool, error) {
	if id == "" {
		return api.Job{}, false, nil
	}
	s.mu.Lock()
	jobID, ok := s.requests[requestKey(owner, id)]
	s.mu.Unlock()
	if !ok {
		return api.Job{}, false, nil
	}
	j, err := s.Get(jobID)
	if err != nil {
		return api.Job{}, false, fmt.Errorf("request %s: %w", id, err)
	}
	return j, true, nil
}

// mirrorPending writes new jobs' folders and mirrors as they come, until
// Close (which it waits for to write the last ones).
func (s *Store) mirrorPending() {
	defer close(s.stopped)
	for range s.kick {
		s.flushPending()
	}
	s.flushPending()
}

func (s *Store) flushPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, j := range s.pending {
		s.mirror(j, false)
		delete(s.pending, id)
	}
}

// Put replaces the record of an existing job.
func (s *Store) Put(j api.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putLocked(j)
}

// PutUnsynced is Put without waiting for the disk: for a change that a
// crash may lose because recovery rebuilds it from elsewhere (the next
// synced write carries it to disk too).
func (s *Store) PutUnsynced(j api.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.db.NoSync = true
	defer func() { s.db.NoSync = false }()
	return s.putLocked(j)
}

func (s *Store) putLocked(j api.Job) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if b.Get([]byte(j.ID)) == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, j.ID)
		}
		return put(b, j)
	})
	if err != nil {
		return fmt.Errorf("update job %s: %w", j.ID, err)
	}
	delete(s.pending, j.ID) // this newer record replaces it
	s.mirror(j, false)
	return nil
}

func put(b *bolt.Bucket, j api.Job) error {
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", j.ID, err)
	}
	return b.Put([]byte(j.ID), data)
}

// Get returns the job with id, or an error wrapping ErrNotFound.
func (s *Store) Get(id string) (api.Job, error) {
	var j api.Job
	err := s.db.View(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketJobs).Get([]byte(id))
		if data == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return json.Unmarshal(data, &j)
	})
	if err != nil {
		return api.Job{}, fmt.Errorf("get job: %w", err)
	}
	return j, nil
}

// List returns every job in submission order.
func (s *Store) List() ([]api.Job, error) {
	var out []api.Job
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var j api.Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("decode job %s: %w", k, err)
			}
			out = append(out, j)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	sortJobs(out)
	return out, nil
}

func sortJobs(js []api.Job) {
	slices.SortFunc(js, func(a, b api.Job) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
}
