package cli

import (
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/gpusummary"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/internal/termsafe"
)

// useSumWords is a row's summed use: measured and simulated apart, each
// labelled ("1.3 measured (20 GiB)"), then the GPUs nothing measures;
// terminal-safe.
func useSumWords(s *gpusummary.UseSum) string {
	if s == nil {
		return "-"
	}
	var parts []string
	for _, f := range []struct {
		fig    *gpusummary.UseFigure
		source gpuuse.Source
	}{{s.Measured, gpuuse.Measured}, {s.Simulated, gpuuse.Simulated}} {
		if f.fig == nil {
			continue
		}
		busy := "-"
		if f.fig.Busy != nil {
			busy = gpuAmount(*f.fig.Busy)
		}
		p := busy + " " + string(f.source)
		if f.fig.MemoryUsedMiB != nil {
			p += " (" + humanMiB(*f.fig.MemoryUsedMiB) + ")"
		}
		parts = append(parts, p)
	}
	switch {
	case s.NotMetered == 0 && len(parts) == 0:
		return "-" // no GPU of this model here
	case s.NotMetered > 0 && len(parts) == 0 && s.Reason != "":
		return termsafe.String(s.Reason)
	case s.NotMetered > 0:
		parts = append(parts, fmt.Sprintf("%d not metered", s.NotMetered))
	}
	return strings.Join(parts, " + ")
}

// memWords is the memory a GPU holds, as " (8 GiB)", or "" when unknown.
func memWords(u gpuuse.Use) string {
	if !u.Known() || u.MemoryUsedMiB == nil {
		return ""
	}
	return " (" + humanMiB(*u.MemoryUsedMiB) + ")"
}
