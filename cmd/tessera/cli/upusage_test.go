package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/arbiter/mps/mpstest"
)

// Every bad value given to tessera up is a usage error, as for the other
// commands: exit 2, naming the flag, the value and what it takes; and no
// daemon starts.
func TestUpBadFlagsExit2(t *testing.T) {
	dir := t.TempDir()
	fake := mpstest.Write(t)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--sharing", "fair"}, []string{`--sharing: must be shared or mps, got "fair"`}},
		{[]string{"--socket-mode", "abc"}, []string{`--socket-mode: must be an octal file mode in [0000, 0777] such as 0600, got "abc"`}},
		{[]string{"--socket-mode", "1777"}, []string{`--socket-mode: must be an octal file mode in [0000, 0777]`, `got "1777"`}},
		{[]string{"--stop-grace", "-5s"}, []string{`--stop-grace: must be a positive duration such as 10s, got -5s`}},
		{[]string{"--stop-grace", "0s"}, []string{`--stop-grace: must be a positive duration`, `got 0s`}},
		{[]string{"--policy", "nope"}, []string{`--policy: must be one of `, "tessera", `or default`, `got "nope"`}},
		{[]string{"--http", "0.0.0.0:9400"}, []string{`--http: must be a loopback address such as 127.0.0.1:9400`, `got "0.0.0.0:9400"`}},
		{[]string{"--preemption-min-runtime", "-1m"}, []string{`--preemption-min-runtime: must be a duration >= 0 such as 1m, got -1m0s`}},
		{[]string{"--simulate", "3xNoSuchGPU"}, []string{"--simulate 3xNoSuchGPU:"}},
		{[]string{"--idle-after", "10s"}, []string{`--idle-after: must be in [1m0s, 168h0m0s], got 10s`}},
		{[]string{"--idle-below", "0.9"}, []string{`--idle-below: must be in [0.001, 0.500] of a GPU, got 0.900`}},
		{[]string{"--idle-below", "lots"}, []string{`--idle-below: must be a GPU share such as 0.05 or 5%`}},
		{[]string{"--intercept-lib", filepath.Join(dir, "missing.so")}, []string{"--intercept-lib: must be an existing library file"}},
		{[]string{"--mps-root", "/tmp/mps"}, []string{"--mps-root: only with --sharing mps, got --sharing shared"}},
		{[]string{"--sharing", "mps", "--simulate", "1xH200"}, []string{"--sharing mps: needs NVIDIA GPUs"}},
		{[]string{"--sharing", "mps", "--simulate", "1xH200", "--mps-control", filepath.Join(dir, "missing")}, []string{"--mps-control: must be an executable file"}},
		{[]string{"--sharing", "mps", "--simulate", "1xH200", "--mps-control", fake, "--mps-root", "/" + strings.Repeat("r", 80)}, []string{"--mps-root: "}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errs := tessera(append([]string{"up", "--state-dir", dir, "--socket", filepath.Join(dir, "api.sock")}, tt.args...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d (a usage error); stderr %q", code, exitUsage, errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			if strings.Contains(errs, "placement policy:") {
				t.Errorf("stderr %q names the engine's setting, not the flag", errs)
			}
		})
	}
}
