package migctl

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/tessera-gpu/tessera/internal/statefile"
)

// journalVersion is the journal file's format.
const journalVersion = 1

// journalFormat is the journal's kind of state file.
func journalFormat() statefile.Format {
	return statefile.Format{Name: "MIG journal", Version: journalVersion}
}

type journalFile struct {
	Version int `json:"version"`
	// Workloads maps a workload to the instances it holds or was having
	// created.
	Workloads map[string][]Want `json:"workloads"`
}

// Journal makes the manager keep its bookings in the file at path (written
// atomically at every change; an instance is recorded before the driver
// is asked to create it) and returns the bookings the file held: those
// of an earlier run. The caller passes the ones whose workloads have ended
// to Reconcile as ended, so an instance created just before a crash is not
// leaked. A missing file holds nothing; a damaged one, one of another
// version or one with a field it does not know is an error
// (internal/statefile).
func (m *Manager) Journal(path string) (map[string][]Want, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("MIG journal: must be an absolute path, got %q", path)
	}
	var f journalFile
	if _, err := journalFormat().Load(path, &f); err != nil {
		return nil, err
	}
	prev := map[string][]Want{}
	for id, ws := range f.Workloads {
		prev[id] = slices.Clone(ws)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.journal = path
	return prev, nil
}

// writeLocked records the bookings (held and pending) in the journal.
func (m *Manager) writeLocked() error {
	if m.journal == "" {
		return nil
	}
	f := journalFile{Version: journalVersion, Workloads: map[string][]Want{}}
	for id, hs := range m.held {
		for _, h := range hs {
			f.Workloads[id] = append(f.Workloads[id], h.want)
		}
	}
	for id, ws := range m.pending {
		f.Workloads[id] = append(f.Workloads[id], ws...)
	}
	return journalFormat().Save(m.journal, f)
}
