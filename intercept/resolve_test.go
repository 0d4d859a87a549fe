package intercept

import (
	"strings"
	"testing"
)

func TestWrappersReturnedByDlsymAndGetProcAddress(t *testing.T) {
	a := buildAll(t)
	for _, mode := range resolveModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			r := a.run(t, a.base(t).with("TP_RESOLVE="+mode), "procaddr")
			lines := r.lines()
			if r.code != 0 || len(lines) < 30 {
				t.Fatalf("exit %d, %d lines:\n%s\n%s", r.code, len(lines), r.stdout, r.stderr)
			}
			for _, l := range lines[:len(lines)-1] {
				if !strings.HasSuffix(l, "wrapper=1 fake=0") {
					t.Errorf("%s: hooked symbol did not resolve to the tessera wrapper", l)
				}
			}
			if last := lines[len(lines)-1]; last != "procaddr cuDeviceGetName fake=1" {
				t.Errorf("unhooked symbol: %q, want the driver's own", last)
			}
		})
	}
	t.Run("by name when the driver's table holds other addresses", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TP_RESOLVE=proc2", "FAKE_PROCADDR_TRAMPOLINE=1", "TESSERA_MEMORY_LIMIT=1Gi")
		r := a.run(t, e, "alloc:mem:600Mi", "alloc:mem:600Mi", "launch:kernel:1", "launch:kernel_ptsz:1", "stats")
		expectLines(t, r,
			allocLine("mem", 600*mib, 0),
			allocLine("mem", 600*mib, cudaErrorOutOfMemory),
			"launch kernel 1 rc=0",
			"launch kernel_ptsz 1 rc=0",
			"stats launches=2 managed=0 device=1")
	})
}

// ---- compute ----

// region is the compute grant file as the arbiter writes it (layout v1 in
// docs/enforcement.md); the test plays the arbiter.
