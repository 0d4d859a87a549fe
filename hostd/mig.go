package hostd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// MIG on the host daemon is simulated: the placement engine has no MIG
// geometry yet, so a MIG request (count instances of one profile) is placed
// through the engine as its equivalent share of a GPU, on the models of
// this host that offer the profile: compute slices/total slices of the
// GPU's compute, and the profile's memory. The job is then given an
// instance of that profile on each chosen GPU: a configured one (from a
// simulated nodes file's migInstances) when one is free, otherwise a
// simulated one named like them, MIG-<GPU UUID>/<n>. Only simulated hosts
// accept MIG requests; on real GPUs this would need the engine to place
// onto configured instances, which it does not do yet. A simulated MIG
// instance is not isolated from shares on the same GPU: the engine books
// its equivalent share, so the GPU is never over-committed, but a real
// GPU in MIG mode could not hold both.

// inUseLocked is the device UUIDs (GPUs or MIG instances) running jobs hold.
func (d *Daemon) inUseLocked() map[string]bool {
	out := map[string]bool{}
	jobs, err := d.store.List()
	if err != nil {
		d.cfg.Log.Error("list jobs", "err", err)
		return out
	}
	for _, j := range jobs {
		if j.State == api.Running {
			for _, s := range j.Shares {
				out[s.UUID] = true
			}
		}
	}
	return out
}

// migShare is the engine request standing in for a MIG request on this
// host: the equivalent share, on the host's models that offer the profile
// (the largest such profile when models differ). The error is an
// *InputError on the mig-profile field.
func (d *Daemon) migShare(gpu request.GPU) (request.GPU, error) {
	if !d.cfg.Simulated {
		return request.GPU{}, &InputError{Field: request.FieldMIGProfile, Msg: "must be empty on real GPUs: the host daemon hands out MIG instances only on a simulated host (tessera up --simulate) for now"}
	}
	var models, offered []string
	var milli, mem int64
	for _, n := range d.cfg.Nodes {
		for _, g := range n.GPUs {
			m, ok := d.cfg.Catalog.Lookup(g.Model)
			if !ok || !m.SupportsMIG() {
				continue
			}
			if len(gpu.Models) > 0 && !slices.Contains(gpu.Models, m.Name) {
				continue
			}
			p, ok := m.MIGProfile(gpu.MIGProfile)
			if !ok {
				for _, q := range m.MIG.Profiles {
					if !slices.Contains(offered, q.Name) {
						offered = append(offered, q.Name)
					}
				}
				continue
			}
			if !slices.Contains(models, m.Name) {
				models = append(models, m.Name)
			}
			milli = max(milli, int64(p.ComputeSlices)*request.Whole/int64(m.MIG.ComputeSlices))
			mem = max(mem, p.MemoryMiB)
		}
	}
	if len(models) == 0 {
		msg := fmt.Sprintf("must be a MIG profile this host's GPUs offer, got %q", gpu.MIGProfile)
		if len(offered) > 0 {
			msg = fmt.Sprintf("must be a MIG profile this host's GPUs offer (%s), got %q", strings.Join(offered, ", "), gpu.MIGProfile)
		} else {
			msg += " (none of them supports MIG)"
		}
		return request.GPU{}, &InputError{Field: request.FieldMIGProfile, Msg: msg}
	}
	return request.GPU{
		Count: gpu.Count, ComputeMilli: milli, ComputeLimitMilli: milli,
		MemoryMiB: mem, MemoryLimitMiB: mem, Models: models,
	}, nil
}

// migShares gives a MIG job an instance of its profile on each chosen GPU:
// a configured instance not held by a running job, else a simulated one.
// inUse holds the device UUIDs running jobs hold.
func migShares(j api.Job, gpus []inventory.GPU, inUse map[string]bool) []binding.Share {
	var out []binding.Share
	for _, g := range gpus {
		uuid := ""
		for _, mi := range g.MIGInstances {
			if strings.EqualFold(mi.Profile, j.GPU.MIGProfile) && mi.UUID != "" && !inUse[mi.UUID] {
				uuid = mi.UUID
				break
			}
		}
		for k := len(g.MIGInstances); uuid == ""; k++ {
			if c := fmt.Sprintf("MIG-%s/%d", g.UUID, k); !inUse[c] {
				uuid = c
			}
		}
		inUse[uuid] = true
		s := binding.Share{UUID: uuid, Index: g.Index, MIGProfile: j.GPU.MIGProfile}
		if j.EngineGPU != nil {
			s.ComputeMilli, s.ComputeLimitMilli = j.EngineGPU.ComputeMilli, j.EngineGPU.ComputeLimitMilli
			s.MemoryMiB, s.MemoryLimitMiB = j.EngineGPU.MemoryMiB, j.EngineGPU.MemoryLimitMiB
		}
		out = append(out, s)
	}
	return out
}
