package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tessera up --mig-managed hands the layout of GPUs in MIG mode to the
// daemon: on a simulated host whose GPU has a fixed 3g.40gb, a --mig
// 1g.10gb job, refused while the layout is the operator's, runs on an
// instance created for it. GPUs not in MIG mode and unknown UUIDs are
// refused, naming the flag.
func TestUpMIGManaged(t *testing.T) {
	nodes := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(nodes, []byte(`nodes: [{name: h, gpus: 1xA100-80GB+1xL4, overrides: [{index: 0, migInstances: [3g.40gb@4]}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--simulate", "2xA100-80GB", "--mig-managed", "all"}, "--mig-managed all: none of this host's 2 GPUs is in MIG mode"},
		{[]string{"--simulate", "1xA100-80GB", "--mig-managed", "GPU-nope"}, "--mig-managed GPU-nope: GPU-nope is not a GPU of this host"},
		{[]string{"--simulate", nodes, "--mig-managed", "all,"}, "--mig-managed: must be all or a comma-separated list of GPU UUIDs"},
	} {
		code, _, errs := tessera(append([]string{"up", "--state-dir", dir}, tt.args...)...)
		if code == 0 || !strings.Contains(errs, tt.want) {
			t.Errorf("up %v: exit %d, stderr %q; want %q", tt.args, code, errs, tt.want)
		}
	}

	fixed := startUp(t, nodes)
	code, _, errs := tessera(append(append([]string{"run"}, fixed.host...), "--mig", "1g.10gb", "--", "true")...)
	if code == 0 || !strings.Contains(errs, "layout is fixed") {
		t.Errorf("1g.10gb on the operator's fixed layout: exit %d, %q; want a refusal", code, errs)
	}
	fixed.stop()

	managed := startUp(t, nodes, "--mig-managed", "all")
	code, out, errs := tessera(append(append([]string{"run"}, managed.host...), "--mig", "1g.10gb", "--", "sh", "-c", `echo "$CUDA_VISIBLE_DEVICES"`)...)
	if code != 0 || !strings.HasPrefix(out, "MIG-GPU-") || !strings.Contains(out, "/") {
		t.Errorf("1g.10gb on the managed GPU: exit %d, out %q, err %q; want a created instance MIG-<parent>/<start>", code, out, errs)
	}
}
