package checkpoint

import (
	"fmt"
	"sync"

	"github.com/tessera-gpu/tessera/agent/handoff"
)

// Store is the checkpoint of one node, in memory and on disk. Every change
// is on disk before the method returns. It is safe for concurrent use.
type Store struct {
	path string
	mu   sync.Mutex
	file File
}

// Open loads the checkpoint at path for node. A checkpoint of another node
// is an error: the state folder belongs to one node.
func Open(path, node string) (*Store, error) {
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	if f.Node != "" && f.Node != node {
		return nil, fmt.Errorf("checkpoint %s belongs to node %q, not %q", path, f.Node, node)
	}
	f.Node = node
	return &Store{path: path, file: f}, nil
}

// Entries returns a copy of every entry.
func (s *Store) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.file.Entries...)
}

// ByDevices returns the entry holding exactly these device IDs.
func (s *Store) ByDevices(ids []string) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.file.Entries {
		if handoff.SameDevices(e.DeviceIDs, ids) {
			return e, true
		}
	}
	return Entry{}, false
}

// Put adds e, replacing entries with the same key or sharing a device with
// it (kubelet never gives one device to two live containers, so such an
// entry is stale), and saves.
func (s *Store) Put(e Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := map[string]bool{}
	for _, id := range e.DeviceIDs {
		ids[id] = true
	}
	next := []Entry{e}
	for _, old := range s.file.Entries {
		if old.Key == e.Key || sharesDevice(old, ids) {
			continue
		}
		next = append(next, old)
	}
	return s.save(next)
}

// Remove drops the entries whose keys are listed, and saves.
func (s *Store) Remove(keys ...string) error {
	drop := map[string]bool{}
	for _, k := range keys {
		drop[k] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var next []Entry
	for _, e := range s.file.Entries {
		if !drop[e.Key] {
			next = append(next, e)
		}
	}
	return s.save(next)
}

func (s *Store) save(entries []Entry) error {
	f := File{Version: Version, Node: s.file.Node, Entries: entries}
	if err := Save(s.path, f); err != nil {
		return err
	}
	s.file = f
	return nil
}

func sharesDevice(e Entry, ids map[string]bool) bool {
	for _, id := range e.DeviceIDs {
		if ids[id] {
			return true
		}
	}
	return false
}
