package intercept

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkLaunchOverhead measures cuLaunchKernel through the fake driver
// natively, through the library without a grant region (ungated) and
// through the library drawing tokens from a region (gated), and reports
// launches per second and the ratios to native.
func BenchmarkLaunchOverhead(b *testing.B) {
	a := buildAll(b)
	g := createRegion(b, filepath.Join(b.TempDir(), "grant"), fresh, monoNow(), 1<<62)
	base := a.base(b)
	configs := []struct {
		name string
		env  env
	}{
		{"native", base.with("LD_PRELOAD")},
		{"ungated", base},
		{"gated", base.with("TESSERA_ARBITER_REGION=" + g.path)},
	}
	const launches = 2_000_000
	var ns [3]float64
	for b.Loop() {
		for i, c := range configs {
			cmd := exec.Command(a.bench, fmt.Sprint(launches))
			cmd.Env = c.env.list()
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			var n int
			var per float64
			if _, err := fmt.Sscanf(string(out), "launches=%d ns_per_launch=%g", &n, &per); err != nil {
				b.Fatalf("%s: %q: %v", c.name, out, err)
			}
			ns[i] += per
		}
	}
	for i, c := range configs {
		b.ReportMetric(1e9/(ns[i]/float64(b.N)), "launches/s-"+c.name)
	}
	b.ReportMetric(ns[0]/ns[1], "ratio-ungated")
	b.ReportMetric(ns[0]/ns[2], "ratio-gated")
}
