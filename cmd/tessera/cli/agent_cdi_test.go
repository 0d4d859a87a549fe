package cli

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
)

func TestAgentCDISpecFlags(t *testing.T) {
	base := []string{"agent", "--node-name", "n1"}
	refusedWith(t, []refusal{
		{append(base, "--cdi-base-spec", "/etc/cdi/nvidia.yaml"), "--cdi-base-spec: only applies with --cdi-spec"},
		{append(base, "--cdi-spec", "--cdi-spec-dir", "cdi"), `--cdi-spec-dir: must be an absolute path, got "cdi"`},
		{append(base, "--cdi-spec", "--cdi-spec-dir", ""), "--cdi-spec-dir: must be set with --cdi-spec"},
	})

	a := &app{catalog: catalog.Default()}
	f := testAgentFlags()
	o, err := f.options(a)
	if err != nil || o.Paths.CDISpecDir != "" {
		t.Errorf("default: spec dir %q, %v; want no spec written (off by default)", o.Paths.CDISpecDir, err)
	}
	f.cdiSpec, f.cdiBaseSpec = true, "/var/run/cdi/nvidia.yaml"
	o, err = f.options(a)
	if err != nil || o.Paths.CDISpecDir != "/var/run/cdi" || o.Paths.CDIBaseSpec != "/var/run/cdi/nvidia.yaml" {
		t.Errorf("--cdi-spec: paths %+v, %v; want the spec dir and base spec set", o.Paths, err)
	}
}

// TestAgentDRAPublishFlag: --dra-publish reaches the agent's options, off
// by default.
func TestAgentDRAPublishFlag(t *testing.T) {
	a := &app{catalog: catalog.Default()}
	f := testAgentFlags()
	if o, err := f.options(a); err != nil || o.DRAPublish {
		t.Fatalf("default: DRAPublish %v, %v; want off", o.DRAPublish, err)
	}
	f.draPublish = true
	if o, err := f.options(a); err != nil || !o.DRAPublish {
		t.Fatalf("--dra-publish: DRAPublish %v, %v; want on", o.DRAPublish, err)
	}
}

// TestAgentDRAFlag: --dra serves the kubelet plugin with kubelet's folders
// by default and implies publishing the slices; its folder flags are
// refused without it.
func TestAgentDRAFlag(t *testing.T) {
	a := &app{catalog: catalog.Default()}
	f := testAgentFlags()
	f.draPluginDir, f.draRegistryDir = "/var/lib/kubelet/plugins/gpu.tessera.io", "/var/lib/kubelet/plugins_registry"
	if o, err := f.options(a); err != nil || o.DRA {
		t.Fatalf("default: DRA %v, %v; want off", o.DRA, err)
	}
	f.dra = true
	o, err := f.options(a)
	if err != nil || !o.DRA || !o.DRAPublish || o.DRAPluginDir != "/var/lib/kubelet/plugins/gpu.tessera.io" ||
		o.DRARegistryDir != "/var/lib/kubelet/plugins_registry" || o.DRACDIDir != "/var/run/cdi" {
		t.Fatalf("--dra: %+v, %v; want the plugin on, slices published, kubelet's folders and /var/run/cdi", o, err)
	}

	base := []string{"agent", "--node-name", "n1", "--source", "sim:1xH100-SXM"}
	refusedWith(t, []refusal{
		{append(base, "--dra-plugin-dir", "/x"), "--dra-plugin-dir, --dra-registry-dir: only apply with --dra"},
		{append(base, "--dra", "--dra-registry-dir", "reg"), `--dra-registry-dir: must be an absolute path, got "reg"`},
		{append(base, "--dra", "--cdi-spec-dir", ""), "--cdi-spec-dir: must be set with --dra"},
	})
	out, _, code := run(t, "agent", "--help")
	if code != 0 || !strings.Contains(out, "--dra ") || !strings.Contains(out, "implies --dra-publish") {
		t.Errorf("agent --help (exit %d) does not say --dra implies --dra-publish:\n%s", code, out)
	}
}

// refusal is a command line and what its error must say.
type refusal struct {
	args []string
	want string
}

// refusedWith checks that each command line exits non-zero saying want.
func refusedWith(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and %q", tc.args, code, errOut, tc.want)
		}
	}
}
