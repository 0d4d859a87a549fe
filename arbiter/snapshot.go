package arbiter

import (
	"sort"
	"time"

	"github.com/tessera-gpu/tessera/gpuuse"
)

// SeatStatus is one client on one GPU after the last step.
type SeatStatus struct {
	Key string
	GPU string
	// Device is the container's device ordinal (grant record).
	Device int
	// Phase is active, idle or reclaimed (package demand); "mps" in
	// ModeMPS.
	Phase string
	// Demand and Share are in thousandths. In ModeMPS, Share is the cap
	// MPS enforces (the compute limit) and Demand is not estimated (0).
	Demand, Share int64
	// Rate is launches per GPU-second; Measured once a Meter adjusted it.
	Rate     float64
	Measured bool
	// Tokens is the record's balance now.
	Tokens int64
	// Ungated counts launches the library ran without a token while the
	// region was stale (fail-open), as of the last step.
	Ungated uint64
	// Exclusive is set when the GPU runs exclusive slices; Holder when
	// this client holds the slice.
	Exclusive, Holder bool
	// Use is the client's last closed use window (Config.UseWindow):
	// measured, or simulated when the Meter's readings are; Source "" until
	// one closed or without a Meter. Idle is set while the closed windows
	// have stayed below Config.Idle's threshold for its time.
	Use  gpuuse.Use
	Idle *gpuuse.Idle
	// Lends is set while this idle holder's guarantee above its IdleFloor
	// is lent to the GPU's other clients (Config.KeepIdleGuarantee).
	Lends bool
}

// Snapshot returns every seat, sorted by GPU then key.
func (a *Arbiter) Snapshot() []SeatStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []SeatStatus
	for _, g := range a.gpus {
		for _, s := range g.seats {
			phase := s.verdict.Phase.String()
			if a.mps != nil {
				phase = "mps"
			}
			out = append(out, SeatStatus{
				Key: s.c.Key, GPU: g.uuid, Device: s.dev, Phase: phase,
				Demand: s.verdict.Demand, Share: s.got, Rate: s.rate.Rate, Measured: s.rate.Measured,
				Tokens: s.c.region.Read(s.dev).Tokens, Ungated: s.ungated, Exclusive: g.mode.Exclusive, Holder: g.mode.Holder == s.c.Key,
				Use: s.use.Last(), Idle: s.use.Idle(a.cfg.Idle), Lends: s.lends,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// UseRule is how SeatStatus.Use and Idle are made: the use window, the
// idle-holder rule, and whether a Meter reads use at all (none in ModeMPS).
func (a *Arbiter) UseRule() (window time.Duration, idle gpuuse.IdleRule, metered bool) {
	return a.cfg.UseWindow, a.cfg.Idle, a.cfg.Meter != nil && a.mps == nil
}
