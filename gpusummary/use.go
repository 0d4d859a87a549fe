package gpusummary

import (
	"github.com/tessera-gpu/tessera/gpuuse"
)

// UseSum adds up the use of a row's GPUs. Measured and simulated figures
// are summed apart, never into one number, so a simulated figure is never
// read as a measured one.
type UseSum struct {
	Measured  *UseFigure `json:"measured,omitempty"`
	Simulated *UseFigure `json:"simulated,omitempty"`
	// NotMetered counts the GPUs nothing measures; Reason is why, when
	// they all give the same reason.
	NotMetered int    `json:"notMetered"`
	Reason     string `json:"reason,omitempty"`
}

// UseFigure sums the figures of one source.
type UseFigure struct {
	// GPUs counts the GPUs this figure covers.
	GPUs int `json:"gpus"`
	// Busy is the summed busy fraction, in GPUs (1.3 = one and three
	// tenths of a GPU's time); nil while no window has closed.
	Busy *float64 `json:"busy,omitempty"`
	// MemoryUsedMiB is the summed memory in use; nil when unknown.
	MemoryUsedMiB *int64 `json:"memoryUsedMiB,omitempty"`
}

// GPUUse is one GPU's use, as its host daemon reports it.
type GPUUse struct {
	Node  string     `json:"node"`
	Index int        `json:"index"`
	UUID  string     `json:"uuid"`
	Use   gpuuse.Use `json:"use"`
}

// notReported is why a GPU of a report with use has none: the daemon
// that reported use does not manage it.
const notReported = "the host daemon reports no use for this GPU"

// useOf returns the use opt gives for a GPU (not metered, and why, when
// it gives none).
func useOf(opt Options, uuid string) gpuuse.Use {
	if u, ok := opt.Use[uuid]; ok {
		return u
	}
	return gpuuse.NotMetered(notReported)
}

// add counts one GPU's use into s.
func (s *UseSum) add(u gpuuse.Use) {
	var f **UseFigure
	switch u.Source {
	case gpuuse.Measured:
		f = &s.Measured
	case gpuuse.Simulated:
		f = &s.Simulated
	default:
		if s.NotMetered == 0 {
			s.Reason = u.Reason
		} else if s.Reason != u.Reason {
			s.Reason = ""
		}
		s.NotMetered++
		return
	}
	if *f == nil {
		*f = &UseFigure{}
	}
	(*f).GPUs++
	if u.BusyMilli != nil {
		b := float64(*u.BusyMilli) / 1000
		if (*f).Busy != nil {
			b += *(*f).Busy
		}
		(*f).Busy = &b
	}
	if u.MemoryUsedMiB != nil {
		m := *u.MemoryUsedMiB
		if (*f).MemoryUsedMiB != nil {
			m += *(*f).MemoryUsedMiB
		}
		(*f).MemoryUsedMiB = &m
	}
}
