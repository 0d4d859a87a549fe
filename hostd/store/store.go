package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tessera-gpu/tessera/hostd/api"
)

var bucketJobs = []byte("jobs")

// ErrNotFound is returned (wrapped) for an unknown job ID.
var ErrNotFound = errors.New("no such job")

// Store is the job database.
type Store struct {
	db *bolt.DB
}

// Open opens (creating) the database at path. It fails after a second when
// another daemon holds the file.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
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
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close job store: %w", err)
	}
	return nil
}

// Create gives j the next sequence number and an ID ("job-<seq>") and
// stores it; it returns the stored record.
func (s *Store) Create(j api.Job) (api.Job, error) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		j.Seq = seq
		j.ID = fmt.Sprintf("job-%d", seq)
		return put(b, j)
	})
	if err != nil {
		return api.Job{}, fmt.Errorf("create job: %w", err)
	}
	return j, nil
}

// Put replaces the record of an existing job.
func (s *Store) Put(j api.Job) error {
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
	slices.SortFunc(out, func(a, b api.Job) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return out, nil
}
