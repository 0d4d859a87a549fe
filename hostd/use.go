package hostd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// What each running job holds and uses on each GPU (package gpuuse): its
// shares as booked, beside the node arbiter's last use window (measured
// by NVML, or simulated from the job's declared load on simulated GPUs)
// and whether it is an idle holder.

// SimMeter is the node arbiter's Meter on simulated GPUs: each job's GPU
// time is what its declared load (simulated.LoadEnv in its environment,
// from its start) runs over the span since the last reading, and its
// readings say Simulated, so they show as simulated and never adjust a
// launch rate. A job that declares no load runs nothing.
type SimMeter struct {
	Jobs *JobTree
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger

	window simulated.Window
	mu     sync.Mutex
	loads  map[string]simulated.Started
	readAt time.Time
}

// Read implements arbiter.Meter.
func (m *SimMeter) Read(ctx context.Context, uuid string, keys []string) (arbiter.Reading, error) {
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	span, busy, err := m.window.Busy(uuid, now, keys, func() (map[string]simulated.Started, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.jobLoads(ctx, now)
	})
	if err != nil {
		return arbiter.Reading{}, fmt.Errorf("simulated meter: %w", err)
	}
	return arbiter.Reading{Span: span, Busy: busy, Simulated: true}, nil
}

// jobLoads reads the running jobs' loads, at most once per jobRootsTTL
// (m.mu held).
func (m *SimMeter) jobLoads(ctx context.Context, now time.Time) (map[string]simulated.Started, error) {
	d := m.Jobs.d.Load()
	if d == nil {
		return nil, nil
	}
	if m.loads != nil && now.Sub(m.readAt) < jobRootsTTL && !now.Before(m.readAt) {
		return m.loads, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	jobs, err := d.jobsForMeter()
	if err != nil {
		return nil, err
	}
	loads := map[string]simulated.Started{}
	for _, j := range jobs {
		if j.State != api.Running || j.Started == nil {
			continue
		}
		l, err := simulated.ParseLoad(envValue(j.Env, simulated.LoadEnv))
		if err != nil { // refused at submission; a record from before runs nothing
			if m.Log != nil {
				m.Log.Warn("simulated meter: job's load is not understood; it runs nothing", "job", j.ID, "err", err)
			}
			continue
		}
		loads[j.ID] = simulated.Started{Start: *j.Started, Load: l}
	}
	m.loads, m.readAt = loads, now
	return loads, nil
}

// envValue is the last value of name in env (KEY=VALUE entries), "" when
// absent.
func envValue(env []string, name string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// checkSimLoad refuses, on simulated GPUs, a load declaration the
// simulated meter could not read.
func (d *Daemon) checkSimLoad(env []string) error {
	if !d.cfg.Simulated {
		return nil
	}
	if _, err := simulated.ParseLoad(envValue(env, simulated.LoadEnv)); err != nil {
		return &InputError{Field: "env", Msg: err.Error()}
	}
	return nil
}

// UseRule says how this daemon measures use; ok is false without an
// arbiter that reports it.
func (d *Daemon) UseRule() (window time.Duration, idle gpuuse.IdleRule, metered, ok bool) {
	r, ok := d.cfg.Arbiter.(UsageReporter)
	if !ok {
		return 0, gpuuse.IdleRule{}, false, false
	}
	window, idle, metered = r.UseRule()
	return window, idle, metered, true
}

// StatusUse is Status with every GPU's use: each running job's share as
// booked beside its use (GPUStatus.Shares) and their sums (GPUStatus.Use).
// A failed reading of the arbiter leaves the status whole and says why in
// the uses.
func (d *Daemon) StatusUse(ctx context.Context) (api.Status, error) {
	st, err := d.Status()
	if err != nil {
		return st, err
	}
	jobs, err := d.Jobs()
	if err != nil {
		return st, err
	}
	seats, hasArbiter, usageErr := d.Usage(ctx)
	window, rule, metered, _ := d.UseRule()
	if hasArbiter {
		st.Use = &api.UseRule{WindowSeconds: window.Seconds(), IdleBelowMilli: rule.BelowMilli, IdleAfterSeconds: rule.After.Seconds()}
	}
	bySeat := make(map[[2]string]SeatUsage, len(seats))
	for _, s := range seats {
		bySeat[[2]string{s.Job, s.GPU}] = s
	}
	byGPU := map[string]int{}
	for i, g := range st.GPUs {
		if g.UUID != "" {
			byGPU[g.UUID] = i
		}
	}
	for _, j := range jobs {
		if j.State != api.Running {
			continue
		}
		load, _ := simulated.ParseLoad(envValue(j.Env, simulated.LoadEnv))
		for _, sh := range j.Shares {
			uuid := sh.UUID
			if sh.MIG != nil && sh.MIG.GPU != "" {
				uuid = sh.MIG.GPU
			}
			gi, ok := byGPU[uuid]
			if !ok {
				continue
			}
			rec := gpuuse.Share{
				Workload: j.ID, GPU: uuid, Index: sh.Index,
				Booked: gpuuse.Booked{GuaranteedMilli: sh.ComputeMilli, LimitMilli: max(sh.ComputeLimitMilli, sh.ComputeMilli), MemoryMiB: sh.MemoryMiB, MemoryLimitMiB: max(sh.MemoryLimitMiB, sh.MemoryMiB)},
			}
			seat, seated := bySeat[[2]string{j.ID, sh.UUID}]
			switch {
			case !hasArbiter:
				rec.Use = gpuuse.NotMetered("no node arbiter")
			case usageErr != nil && !seated:
				rec.Use = gpuuse.NotMetered("the node arbiter's reading failed: " + usageErr.Error())
			case d.cfg.Sharing == arbiter.ModeMPS:
				rec.Use = gpuuse.NotMetered("NVIDIA MPS shares this GPU and nothing measures its clients' time")
			case !seated && sh.MIG != nil:
				rec.Use = gpuuse.NotMetered("a MIG instance: the node arbiter does not seat it")
			case !seated:
				rec.Use = gpuuse.NotMetered("the job holds no seat with the node arbiter")
			case !metered:
				rec.Use = gpuuse.NotMetered("no GPU utilisation meter (NVML could not be opened)")
			case seat.Use.Known():
				rec.Use, rec.Idle = seat.Use, seat.Idle
			default:
				rec.Use = gpuuse.Use{Source: gpuuse.None, Reason: fmt.Sprintf("not measured yet: the first window closes within %v of the start", window)}
			}
			// Memory in use: the declared load's on simulated GPUs (with
			// the simulated busy figure only), else the interception
			// library's accounting, which needs no NVML meter.
			switch {
			case d.cfg.Simulated && rec.Use.Source == gpuuse.Simulated:
				mem := load.MemoryMiB
				rec.Use.MemoryUsedMiB = &mem
			case !d.cfg.Simulated && seated && j.InterceptLib != "":
				mem := int64(seat.MemoryBytes >> 20)
				rec.Use.MemoryUsedMiB = &mem
			}
			st.GPUs[gi].Shares = append(st.GPUs[gi].Shares, rec)
		}
	}
	for i := range st.GPUs {
		g := gpuuse.GPU{GPU: st.GPUs[i].UUID, Index: st.GPUs[i].Index, Shares: st.GPUs[i].Shares}
		g.Sum("no job runs on it")
		st.GPUs[i].Use = &g.Use
	}
	return st, nil
}
