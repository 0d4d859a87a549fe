package hostd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// MIG on the host daemon (docs/mig.md, "What a front door does"): a MIG
// request (--mig, count instances of one profile) goes to the placement
// engine as it is. The engine places it on a free instance of the profile
// on a GPU in MIG mode, or, on a GPU whose layout Tessera manages
// (migManaged in a simulated nodes file), at the start slot its MIG
// planner chooses for a new instance; a GPU in MIG mode never takes a
// fractional or whole-GPU job, and a MIG job never lands on a GPU that is
// not in MIG mode. The engine books the instance (it is in use while the
// job runs) and releases it when the job ends, removing an instance it
// created.
//
// Creating an instance is simulated: on a simulated host the new instance
// is named MIG-<parent GPU UUID>/<start slot>. On real GPUs the daemon
// uses existing instances only (discovery does not mark real GPUs as
// managed), so the engine never asks it to create one there.

// checkMIG says in host words why a MIG request cannot be served by this
// host's GPUs in MIG mode: the host has none (of the allowed models), or
// none of them offers the profile. The error is an *InputError on the
// mig-profile field (the --mig flag).
func (d *Daemon) checkMIG(gpu request.GPU) error {
	var migModels, capable, offered []string
	for _, n := range d.cfg.Nodes {
		for _, g := range n.GPUs {
			if len(gpu.Models) > 0 && !slices.Contains(gpu.Models, g.Model) {
				continue
			}
			m, ok := d.cfg.Catalog.Lookup(g.Model)
			if g.MIGMode != inventory.MIGEnabled {
				if ok && m.SupportsMIG() && !slices.Contains(capable, m.Name) {
					capable = append(capable, m.Name)
				}
				continue
			}
			if !slices.Contains(migModels, g.Model) {
				migModels = append(migModels, g.Model)
			}
			if !ok || !m.SupportsMIG() {
				// Unknown geometry: only existing instances can be used.
				for _, in := range g.MIGInstances {
					if strings.EqualFold(in.Profile, gpu.MIGProfile) {
						return nil
					}
				}
				continue
			}
			if _, ok := m.MIGProfile(gpu.MIGProfile); ok {
				return nil
			}
			if s := m.Name + " has " + strings.Join(m.MIG.ProfileNames(), ", "); !slices.Contains(offered, s) {
				offered = append(offered, s)
			}
		}
	}
	of := ""
	if len(gpu.Models) > 0 {
		of = " of the models --model allows"
	}
	switch {
	case len(migModels) == 0 && len(capable) > 0:
		return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be empty on this host, got %q: none of its GPUs%s is in MIG mode (%s support MIG, but Tessera never switches MIG mode: the operator enables it)",
			gpu.MIGProfile, of, strings.Join(capable, ", "))}
	case len(migModels) == 0:
		return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be empty on this host, got %q: none of its GPUs%s is in MIG mode (none of them supports MIG)", gpu.MIGProfile, of)}
	case len(offered) == 0:
		return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be a MIG profile of an instance this host's GPUs in MIG mode have, got %q", gpu.MIGProfile)}
	}
	return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be a MIG profile this host's GPUs in MIG mode offer (%s), got %q", strings.Join(offered, "; "), gpu.MIGProfile)}
}

// migEquivalent is a MIG request's equivalent share (compute slices over
// the GPU's compute slices, the profile's memory), the largest among this
// host's models that offer the profile. It only counts toward fair-share
// usage: the engine places the MIG request itself.
func (d *Daemon) migEquivalent(gpu request.GPU) *request.GPU {
	var milli, mem int64
	for _, n := range d.cfg.Nodes {
		for _, g := range n.GPUs {
			m, ok := d.cfg.Catalog.Lookup(g.Model)
			if !ok || !m.SupportsMIG() || g.MIGMode != inventory.MIGEnabled {
				continue
			}
			if p, ok := m.MIGProfile(gpu.MIGProfile); ok {
				milli = max(milli, int64(p.ComputeSlices)*request.Whole/int64(m.MIG.ComputeSlices))
				mem = max(mem, p.MemoryMiB)
			}
		}
	}
	if milli == 0 {
		return nil
	}
	return &request.GPU{Count: gpu.Count, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: mem, MemoryLimitMiB: mem, Models: gpu.Models}
}

// migShares turns a MIG decision into one share per chosen GPU: the
// instance taken (its UUID), or the instance created for the job at the
// chosen start slot (simulated hosts only), with where it lies.
func (d *Daemon) migShares(j api.Job, dec placement.Decision, gpus []inventory.GPU) ([]binding.Share, error) {
	if len(dec.MIG) != len(gpus) {
		return nil, fmt.Errorf("MIG decision names %d GPUs but %d instances", len(gpus), len(dec.MIG))
	}
	var out []binding.Share
	for k, g := range gpus {
		ch := dec.MIG[k]
		s := binding.Share{UUID: ch.UUID, Index: g.Index, MIGProfile: j.GPU.MIGProfile, MIG: &binding.MIGInstance{GPU: g.UUID, Start: ch.Start, Create: ch.Create}}
		if ch.Create {
			if !d.cfg.Simulated {
				return nil, fmt.Errorf("GPU %d: creating a MIG instance is only simulated on this host daemon", g.Index)
			}
			s.UUID = simulatedMIGUUID(g.UUID, ch.Start)
		}
		s.ComputeMilli, s.ComputeLimitMilli = request.Whole, request.Whole
		s.MemoryMiB, s.MemoryLimitMiB = 1, 1
		if m, ok := d.cfg.Catalog.Lookup(g.Model); ok && m.SupportsMIG() {
			if p, ok := m.MIGProfile(j.GPU.MIGProfile); ok {
				s.MIGProfile = p.Name
				c := int64(p.ComputeSlices) * request.Whole / int64(m.MIG.ComputeSlices)
				s.ComputeMilli, s.ComputeLimitMilli = c, c
				s.MemoryMiB, s.MemoryLimitMiB = p.MemoryMiB, p.MemoryMiB
			}
		}
		for _, in := range g.MIGInstances {
			if !ch.Create && in.UUID == ch.UUID && in.MemoryMiB > 0 {
				s.MemoryMiB, s.MemoryLimitMiB = in.MemoryMiB, in.MemoryMiB
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// simulatedMIGUUID names an instance a simulated host creates.
func simulatedMIGUUID(parent string, start int) string {
	return fmt.Sprintf("MIG-%s/%d", parent, start)
}

// migChoices rebuilds a MIG job's engine choices from its shares: an
// instance created for the job is booked again as created at its start
// (the snapshot, built from the configured layout, does not have it), an
// existing one by its UUID.
func migChoices(j api.Job) []placement.MIGChoice {
	if !isMIG(j) {
		return nil
	}
	var out []placement.MIGChoice
	for _, s := range j.Shares {
		switch {
		case s.MIG == nil:
			// A record from before exact MIG placement: its instance is
			// unknown to the engine.
			return nil
		case s.MIG.Create:
			out = append(out, placement.MIGChoice{Start: s.MIG.Start, Create: true})
		default:
			out = append(out, placement.MIGChoice{Start: s.MIG.Start, UUID: s.UUID})
		}
	}
	return out
}
