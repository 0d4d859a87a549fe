package migctl

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
)

// GPU is a managed GPU: its UUID, NVML handle and the catalog's MIG
// geometry for its model.
type GPU struct {
	UUID   string
	Device nvml.Device
	Spec   *catalog.MIGSpec
}

// Want is an instance a workload holds or is to hold: the engine's choice
// (binding.MIGInstance with Create set).
type Want struct {
	GPU     string `json:"gpu"`
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

// WantOf is the instance a share asks the node to create (its MIG
// placement with Create set; binding.Share.MIG must be set).
func WantOf(s binding.Share) Want {
	return Want{GPU: s.MIG.GPU, Profile: s.MIGProfile, Start: s.MIG.Start}
}

// Ended returns the bookings of prev (an earlier run's, from Journal) that
// wanted (the instances running workloads hold now) does not have: the
// instances of workloads that ended, for Reconcile.
func Ended(prev, wanted map[string][]Want) map[string][]Want {
	out := map[string][]Want{}
	for id, ws := range prev {
		for _, w := range ws {
			if !slices.Contains(wanted[id], w) {
				out[id] = append(out[id], w)
			}
		}
	}
	return out
}

// Manager creates and destroys the instances of workloads on managed GPUs
// and books them by workload, so no slot is handed to two workloads. Safe
// for concurrent use.
type Manager struct {
	mu   sync.Mutex
	gpus map[string]GPU
	// held maps a workload to its instances.
	held map[string][]held
	// pending are instances being created (in the journal before the
	// driver is asked, so a crash mid-way leaks nothing).
	pending map[string][]Want
	// journal, when set, is the file the bookings are kept in.
	journal string
}

type held struct {
	want Want
	inst Instance
}

// NewManager manages gpus (GPUs in MIG mode whose layout the operator
// hands to Tessera; never others).
func NewManager(gpus []GPU) *Manager {
	m := &Manager{gpus: map[string]GPU{}, held: map[string][]held{}, pending: map[string][]Want{}}
	for _, g := range gpus {
		m.gpus[g.UUID] = g
	}
	return m
}

// overlapLocked names the workload holding a slice w would take, "" if none.
func (m *Manager) overlapLocked(w Want, size int, except string) string {
	for id, hs := range m.held {
		for _, h := range hs {
			if id == except || h.want.GPU != w.GPU {
				continue
			}
			hp := m.gpus[w.GPU].Spec.Profiles[m.gpus[w.GPU].Spec.ProfileIndex(h.want.Profile)]
			if w.Start < h.want.Start+hp.MemorySlices && h.want.Start < w.Start+size {
				return id
			}
		}
	}
	return ""
}

// Acquire creates workload's instance w before the workload starts. A
// second call for the same workload and instance returns the instance it
// holds; a slot another workload holds is refused without asking the
// driver.
func (m *Manager) Acquire(workload string, w Want) (Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.gpus[w.GPU]
	if !ok {
		return Instance{}, fmt.Errorf("GPU %s: not a GPU whose MIG layout Tessera manages", w.GPU)
	}
	i := g.Spec.ProfileIndex(w.Profile)
	if i < 0 {
		return Instance{}, fmt.Errorf("GPU %s: MIG profile %s is not a profile of it", w.GPU, w.Profile)
	}
	for _, h := range m.held[workload] {
		if h.want == w {
			return h.inst, nil
		}
	}
	if other := m.overlapLocked(w, g.Spec.Profiles[i].MemorySlices, workload); other != "" {
		return Instance{}, fmt.Errorf("GPU %s: %s at slice %d overlaps an instance workload %s holds", w.GPU, w.Profile, w.Start, other)
	}
	// The intent is journalled before the driver is asked: a crash after
	// the creation leaves a record the next Reconcile settles.
	m.pending[workload] = append(m.pending[workload], w)
	if err := m.writeLocked(); err != nil {
		m.dropPendingLocked(workload, w)
		return Instance{}, fmt.Errorf("GPU %s: %s at slice %d: %w", w.GPU, w.Profile, w.Start, err)
	}
	inst, err := Create(g.Device, g.Spec, w.Profile, w.Start)
	m.dropPendingLocked(workload, w)
	if err != nil {
		_ = m.writeLocked() // a stale intent only asks a later Reconcile to destroy nothing
		return Instance{}, fmt.Errorf("GPU %s: %w", w.GPU, err)
	}
	inst.GPU = w.GPU
	m.held[workload] = append(m.held[workload], held{want: w, inst: inst})
	_ = m.writeLocked() // the intent already records it
	return inst, nil
}

// Release destroys workload's instances after it ended. An instance still
// in use stays booked (ErrInUse, retry later); the others are destroyed
// and forgotten.
func (m *Manager) Release(workload string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keep []held
	var errs []error
	for _, h := range m.held[workload] {
		g := m.gpus[h.want.GPU]
		if err := Destroy(g.Device, g.Spec, h.want.Profile, h.want.Start); err != nil {
			keep = append(keep, h)
			errs = append(errs, fmt.Errorf("GPU %s: %w", h.want.GPU, err))
		}
	}
	if len(keep) == 0 {
		delete(m.held, workload)
	} else {
		m.held[workload] = keep
	}
	if err := m.writeLocked(); err != nil {
		// The instances are gone; a stale record only asks a later
		// Reconcile to destroy what no longer exists.
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Workloads lists the workloads holding instances, sorted.
func (m *Manager) Workloads() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.held))
	for id := range m.held {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Holds returns the instances workload holds.
func (m *Manager) Holds(workload string) []Instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Instance
	for _, h := range m.held[workload] {
		out = append(out, h.inst)
	}
	return out
}

// Report is what Reconcile did.
type Report struct {
	// Adopted are workloads' instances found on the GPUs.
	Adopted []string
	// Created are workloads' instances that were missing and were made.
	Created []string
	// Destroyed are ended workloads' instances removed.
	Destroyed []string
	// Busy are ended workloads' instances left because they are in use.
	Busy []string
}

// Reconcile runs after a restart. wanted are the instances running or
// starting workloads hold (from their bindings): one found on its GPU at
// its start with its profile is adopted as it is, a missing one is
// created. ended are instances Tessera created for workloads that have
// ended: each is destroyed unless in use, when it is left and reported
// busy (still booked to its workload, so Release retries it; so is one
// whose destruction failed otherwise). Instances in neither list are never
// touched. The journal, when set, is rewritten with what is booked after:
// call Reconcile right after Journal, with every booking Journal returned
// in wanted or ended, before any Acquire.
func (m *Manager) Reconcile(wanted, ended map[string][]Want) (Report, error) {
	var rep Report
	var errs []error
	found := map[string][]Instance{}
	for uuid, g := range m.gpus {
		list, err := List(g.Device, g.Spec)
		if err != nil {
			return rep, fmt.Errorf("GPU %s: list MIG instances: %w", uuid, err)
		}
		found[uuid] = list
	}
	// Ended instances first: their slots may be wanted, and a creation
	// rewrites the journal, which must keep every ended one not yet settled.
	for _, id := range sortedKeys(ended) {
		for _, w := range ended[id] {
			g, ok := m.gpus[w.GPU]
			if !ok {
				continue
			}
			label := fmt.Sprintf("%s: %s at slice %d on %s", id, w.Profile, w.Start, w.GPU)
			err := Destroy(g.Device, g.Spec, w.Profile, w.Start)
			switch {
			case errors.Is(err, ErrInUse):
				rep.Busy = append(rep.Busy, label)
				m.mu.Lock()
				if !m.holdsLocked(id, w) {
					m.held[id] = append(m.held[id], held{want: w, inst: Instance{GPU: w.GPU, Profile: w.Profile, Start: w.Start}})
				}
				m.mu.Unlock()
			case err != nil:
				// Kept booked, so a later Release (and the journal) retries it.
				errs = append(errs, fmt.Errorf("%s: %w", label, err))
				m.mu.Lock()
				if !m.holdsLocked(id, w) {
					m.held[id] = append(m.held[id], held{want: w, inst: Instance{GPU: w.GPU, Profile: w.Profile, Start: w.Start}})
				}
				m.mu.Unlock()
			default:
				rep.Destroyed = append(rep.Destroyed, label)
			}
		}
	}
	for _, id := range sortedKeys(wanted) {
		for _, w := range wanted[id] {
			var inst *Instance
			for k := range found[w.GPU] {
				if f := found[w.GPU][k]; f.Start == w.Start && f.Profile == w.Profile {
					inst = &found[w.GPU][k]
					inst.GPU = w.GPU
				}
			}
			label := fmt.Sprintf("%s: %s at slice %d on %s", id, w.Profile, w.Start, w.GPU)
			if inst != nil {
				m.mu.Lock()
				if !m.holdsLocked(id, w) {
					m.held[id] = append(m.held[id], held{want: w, inst: *inst})
				}
				m.mu.Unlock()
				rep.Adopted = append(rep.Adopted, label)
				continue
			}
			if _, err := m.Acquire(id, w); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", label, err))
				continue
			}
			rep.Created = append(rep.Created, label)
		}
	}
	m.mu.Lock()
	if err := m.writeLocked(); err != nil {
		errs = append(errs, err)
	}
	m.mu.Unlock()
	return rep, errors.Join(errs...)
}

func (m *Manager) holdsLocked(id string, w Want) bool {
	for _, h := range m.held[id] {
		if h.want == w {
			return true
		}
	}
	return false
}

func (m *Manager) dropPendingLocked(workload string, w Want) {
	ws := m.pending[workload]
	for k := range ws {
		if ws[k] == w {
			ws = append(ws[:k], ws[k+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(m.pending, workload)
	} else {
		m.pending[workload] = ws
	}
}

func sortedKeys(m map[string][]Want) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
