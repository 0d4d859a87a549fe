package simulated

import (
	"fmt"
	"strings"
	"time"

	"github.com/tessera-gpu/tessera/quantity"
)

// LoadEnv is the environment variable a job on simulated GPUs declares its
// load in (Load, ParseLoad): the simulated meter derives the job's use of
// each of its GPUs from it.
const LoadEnv = "TESSERA_SIM_LOAD"

// Load is a job's declared use of each of its simulated GPUs: Busy of the
// GPU's time (thousandths) while on, and MemoryMiB held throughout. With
// On and Off set it repeats On busy then Off idle from the job's start;
// otherwise it is busy all along.
type Load struct {
	BusyMilli int64
	On, Off   time.Duration
	MemoryMiB int64
}

// ParseLoad reads a load declaration: comma-separated key=value pairs,
// busy=SHARE (0.6, 60%, 600m; at most 1), on=DURATION and off=DURATION
// (both or neither), memory=SIZE (20Gi); a bare SHARE is busy=SHARE. ""
// declares nothing: no GPU time and no memory.
func ParseLoad(s string) (Load, error) {
	var l Load
	s = strings.TrimSpace(s)
	if s == "" {
		return l, nil
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			k, v = "busy", k
		}
		if seen[k] {
			return Load{}, fmt.Errorf("%s: %s given twice in %q", LoadEnv, k, s)
		}
		seen[k] = true
		var err error
		switch k {
		case "busy":
			l.BusyMilli, err = quantity.ParseShare(v)
			if err == nil && (l.BusyMilli < 0 || l.BusyMilli > quantity.MilliPerUnit) {
				err = fmt.Errorf("must be in [0, 1] of a GPU, got %s", v)
			}
		case "on":
			l.On, err = positiveDuration(v)
		case "off":
			l.Off, err = positiveDuration(v)
		case "memory":
			l.MemoryMiB, err = quantity.ParseMiB(v)
		default:
			return Load{}, fmt.Errorf("%s: unknown key %q in %q (use busy, on, off, memory; e.g. busy=0.6,on=2m,off=8m,memory=20Gi)", LoadEnv, k, s)
		}
		if err != nil {
			return Load{}, fmt.Errorf("%s: %s: %w", LoadEnv, k, err)
		}
	}
	if (l.On > 0) != (l.Off > 0) {
		return Load{}, fmt.Errorf("%s: on and off go together (busy on for one, idle for the other, repeating), got %q", LoadEnv, s)
	}
	return l, nil
}

func positiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < time.Second {
		return 0, fmt.Errorf("must be at least 1s, got %s", v)
	}
	return d, nil
}

// Busy is the GPU time a job that started at start and declared l runs in
// [from, to]: its busy fraction times the part of the span it is on.
func (l Load) Busy(start, from, to time.Time) time.Duration {
	a, b := max(from.Sub(start), 0), max(to.Sub(start), 0)
	on := b - a
	if l.On > 0 {
		on = l.onBefore(b) - l.onBefore(a)
	}
	return time.Duration(int64(on) * l.BusyMilli / quantity.MilliPerUnit)
}

// onBefore is how long the pattern is on in [0, x).
func (l Load) onBefore(x time.Duration) time.Duration {
	p := l.On + l.Off
	return x/p*l.On + min(x%p, l.On)
}
