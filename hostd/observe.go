package hostd

import (
	"context"
	"errors"
	"time"

	"github.com/tessera-gpu/tessera/gpuuse"
)

// What the web UI (hostd/server, package webui) reads besides the queries
// of query.go: when the state changes, when the daemon ends, and what the
// node arbiter last did. Read-only.

// Changed returns a channel closed at the next job state change (a job
// submitted, started, stopped or ended).
func (d *Daemon) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// Done returns a channel closed when the daemon is closed.
func (d *Daemon) Done() <-chan struct{} { return d.life.Done() }

// SeatUsage is what the node arbiter did for one running job on one GPU
// in its last step.
type SeatUsage struct {
	// Job is the job's ID; GPU the GPU's UUID.
	Job, GPU string
	// Phase is active, idle or reclaimed (launch tokens), or mps.
	Phase string
	// GrantedMilli is the compute granted for the period, in thousandths
	// of the GPU (in MPS mode the cap MPS enforces); DemandMilli the
	// arbiter's estimate of the job's demand.
	GrantedMilli, DemandMilli int64
	// Metered says the grant follows GPU time measured by the meter
	// (NVML), not the static launch rate alone.
	Metered bool
	// MemoryBytes is the GPU memory the job holds on the GPU, from the
	// interception library's accounting (0 without the library).
	MemoryBytes uint64
	// Use is the arbiter's last closed use window for the job on the GPU
	// (measured, or simulated on simulated GPUs; Source "" before the
	// first); Idle is set while the job is an idle holder there.
	Use  gpuuse.Use
	Idle *gpuuse.Idle
}

// UsageReporter is implemented by an Arbiter (Config.Arbiter) that can say
// what it last granted and measured; ArbiterSeat does.
type UsageReporter interface {
	Usage(ctx context.Context) ([]SeatUsage, error)
	// UseRule is how use is measured: the use window, the idle-holder
	// rule, and whether a meter (NVML, or the simulated one) reads use.
	UseRule() (window time.Duration, idle gpuuse.IdleRule, metered bool)
}

// Usage returns the node arbiter's last view of the running jobs; ok is
// false when the daemon runs without an arbiter that reports one.
func (d *Daemon) Usage(ctx context.Context) (seats []SeatUsage, ok bool, err error) {
	r, ok := d.cfg.Arbiter.(UsageReporter)
	if !ok {
		return nil, false, nil
	}
	seats, err = r.Usage(ctx)
	return seats, true, err
}

// Usage implements UsageReporter from the arbiter's last step (Snapshot)
// and the jobs' memory accounting (Memory). A failed memory reading
// returns the grants with the error.
func (s ArbiterSeat) Usage(ctx context.Context) ([]SeatUsage, error) {
	a := s.Enforcer.Arbiter
	if a == nil {
		return nil, errors.New("no node arbiter")
	}
	mem, err := a.Memory(ctx)
	held := map[[2]string]uint64{}
	for _, m := range mem {
		held[[2]string{m.Key, m.GPU}] = m.Bytes
	}
	var out []SeatUsage
	for _, st := range a.Snapshot() {
		out = append(out, SeatUsage{
			Job: st.Key, GPU: st.GPU, Phase: st.Phase, GrantedMilli: st.Share, DemandMilli: st.Demand,
			Metered: st.Measured, MemoryBytes: held[[2]string{st.Key, st.GPU}], Use: st.Use, Idle: st.Idle,
		})
	}
	return out, err
}

// UseRule implements UsageReporter.
func (s ArbiterSeat) UseRule() (time.Duration, gpuuse.IdleRule, bool) {
	if s.Enforcer.Arbiter == nil {
		return 0, gpuuse.IdleRule{}, false
	}
	return s.Enforcer.Arbiter.UseRule()
}
