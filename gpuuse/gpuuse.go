package gpuuse

import (
	"fmt"
	"time"
)

// Source says where a use figure comes from.
type Source string

const (
	// Measured figures come from the GPU (NVML through the node arbiter's
	// meter; memory from the interception library's accounting).
	Measured Source = "measured"
	// Simulated figures are derived from the load a job declares on a
	// simulated GPU; they are never shown as measured.
	Simulated Source = "simulated"
	// None: nothing measures this share; Use.Reason says why.
	None Source = "none"
)

// Booked is what a workload holds on one GPU. Compute in thousandths of
// the GPU, memory in MiB.
type Booked struct {
	GuaranteedMilli int64 `json:"guaranteedMilli"`
	LimitMilli      int64 `json:"limitMilli"`
	MemoryMiB       int64 `json:"memoryMiB"`
	MemoryLimitMiB  int64 `json:"memoryLimitMiB"`
}

// Use is what a workload (or all of a GPU's) used, as last measured.
type Use struct {
	Source Source `json:"source"`
	// Reason says why nothing is measured ("not metered: ..."); set with
	// Source None.
	Reason string `json:"reason,omitempty"`
	// BusyMilli is the part of the GPU's time its kernels ran over the
	// window [From, At], in thousandths; nil until a window closed.
	BusyMilli *int64    `json:"busyMilli,omitempty"`
	From      time.Time `json:"from,omitzero"`
	At        time.Time `json:"at,omitzero"`
	// MemoryUsedMiB is the GPU memory held now; nil when unknown (a job
	// without the interception library).
	MemoryUsedMiB *int64 `json:"memoryUsedMiB,omitempty"`
}

// NotMetered is a Use that says why nothing measures it.
func NotMetered(why string) Use { return Use{Source: None, Reason: "not metered: " + why} }

// Known reports whether u carries a figure (measured or simulated).
func (u Use) Known() bool { return u.Source == Measured || u.Source == Simulated }

// Idle marks an idle holder: its use stayed below the rule's threshold
// from Since on, for at least the rule's time.
type Idle struct {
	Since time.Time `json:"since"`
}

// Share is one workload's booking and use of one GPU.
type Share struct {
	Workload string `json:"workload"`
	// GPU is the GPU's UUID, Index its position on its node.
	GPU    string `json:"gpu"`
	Index  int    `json:"index"`
	Booked Booked `json:"booked"`
	Use    Use    `json:"use"`
	// Idle is set when this share is an idle holder.
	Idle *Idle `json:"idle,omitempty"`
}

// GPU is one GPU's bookings and use: the sums of its shares.
type GPU struct {
	GPU    string  `json:"gpu"`
	Index  int     `json:"index"`
	Booked Booked  `json:"booked"`
	Use    Use     `json:"use"`
	Shares []Share `json:"shares,omitempty"`
}

// Sum fills g.Booked and g.Use from g.Shares: bookings add up; busy time
// and memory add up over the shares that carry a figure, labelled with
// their source (simulated when any is); with none, the first share's
// reason, or why bare is given when g has no shares.
func (g *GPU) Sum(bare string) {
	g.Booked, g.Use = Booked{}, Use{}
	for _, s := range g.Shares {
		g.Booked.GuaranteedMilli += s.Booked.GuaranteedMilli
		g.Booked.LimitMilli += s.Booked.LimitMilli
		g.Booked.MemoryMiB += s.Booked.MemoryMiB
		g.Booked.MemoryLimitMiB += s.Booked.MemoryLimitMiB
		u := s.Use
		if !u.Known() {
			if g.Use.Source == "" {
				g.Use = u
			}
			continue
		}
		if !g.Use.Known() {
			g.Use = Use{Source: u.Source}
		}
		if u.Source == Simulated {
			g.Use.Source = Simulated
		}
		if u.BusyMilli != nil {
			g.Use.BusyMilli = addPtr(g.Use.BusyMilli, *u.BusyMilli)
			if g.Use.At.IsZero() || u.At.After(g.Use.At) {
				g.Use.At = u.At
			}
			if g.Use.From.IsZero() || u.From.Before(g.Use.From) {
				g.Use.From = u.From
			}
		}
		if u.MemoryUsedMiB != nil {
			g.Use.MemoryUsedMiB = addPtr(g.Use.MemoryUsedMiB, *u.MemoryUsedMiB)
		}
	}
	if g.Use.Source == "" {
		g.Use = NotMetered(bare)
	}
	if g.Use.BusyMilli != nil {
		*g.Use.BusyMilli = min(*g.Use.BusyMilli, 1000)
	}
}

func addPtr(p *int64, v int64) *int64 {
	if p != nil {
		v += *p
	}
	return &v
}

// Idle-holder rule defaults. Ten minutes is longer than the pauses of a
// working job (checkpoints, data loading, evaluation: seconds to a few
// minutes) and short next to the hours an idle notebook holds a GPU; 5%
// of a GPU is above what an idle CUDA context and a monitoring poll use
// and below any training or inference loop.
const (
	DefaultIdleBelowMilli = 50
	DefaultIdleAfter      = 10 * time.Minute
)

// Ranges of IdleRule's fields.
const (
	MinIdleBelowMilli = 1
	MaxIdleBelowMilli = 500
	MinIdleAfter      = time.Minute
	MaxIdleAfter      = 7 * 24 * time.Hour
)

// IdleRule says when a holder is idle: its busy fraction stays below
// BelowMilli for After.
type IdleRule struct {
	BelowMilli int64
	After      time.Duration
}

// WithDefaults fills zero fields with the defaults.
func (r IdleRule) WithDefaults() IdleRule {
	if r.BelowMilli == 0 {
		r.BelowMilli = DefaultIdleBelowMilli
	}
	if r.After == 0 {
		r.After = DefaultIdleAfter
	}
	return r
}

// Validate checks the ranges; belowName and afterName are how the caller
// names the two fields (a flag, a config key) in its errors.
func (r IdleRule) Validate(belowName, afterName string) error {
	if r.BelowMilli < MinIdleBelowMilli || r.BelowMilli > MaxIdleBelowMilli {
		return fmt.Errorf("%s: must be in [%.3f, %.3f] of a GPU, got %.3f", belowName,
			float64(MinIdleBelowMilli)/1000, float64(MaxIdleBelowMilli)/1000, float64(r.BelowMilli)/1000)
	}
	if r.After < MinIdleAfter || r.After > MaxIdleAfter {
		return fmt.Errorf("%s: must be in [%v, %v], got %v", afterName, MinIdleAfter, MaxIdleAfter, r.After)
	}
	return nil
}
