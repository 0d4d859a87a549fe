package toolbin

import (
	"slices"
	"strings"
	"testing"
)

// Every tool is built in one of the three tools modules, from a pinned
// module whose version names its binary.
func TestEveryToolHasItsModule(t *testing.T) {
	for name, tl := range knownTools() {
		if !slices.Contains([]string{ClusterModule, ContainerdModule, KueueModule}, tl.module) {
			t.Errorf("%s is built in %s, not a tools module", name, tl.module)
		}
		if Pinned(name) == "" {
			t.Errorf("%s: no pinned module", name)
		}
	}
	if Pinned("no-such-tool") != "" {
		t.Error("Pinned of an unknown tool is not empty")
	}
}

func TestRequiredVersion(t *testing.T) {
	gomod := "module x\n\ngo 1.26\n\nrequire k8s.io/kubernetes v1.37.2\n\nrequire (\n\tsigs.k8s.io/kwok v0.8.0\n\tk8s.io/api v0.37.2 // indirect\n)\n"
	for module, want := range map[string]string{
		"k8s.io/kubernetes": "v1.37.2", // one-line require
		"sigs.k8s.io/kwok":  "v0.8.0",  // in a block
		"k8s.io/api":        "v0.37.2", // indirect
		"k8s.io":            "",        // a prefix is not the module
		"helm.sh/helm/v4":   "",
	} {
		if got := RequiredVersion(gomod, module); got != want {
			t.Errorf("RequiredVersion(%s) = %q, want %q", module, got, want)
		}
	}
}

// Every module's programs link without symbols and DWARF, and keep their
// version stamp.
func TestBuildFlagsStripAndStamp(t *testing.T) {
	versions := map[string]string{"kubelet": "v1.37.2", "containerd": "v2.2.0", "kueue": "v0.17.0"}
	for _, module := range []string{ClusterModule, ContainerdModule, KueueModule} {
		flags := strings.Join(buildFlags(module, versions), " ")
		if !strings.Contains(flags, "-s -w ") {
			t.Errorf("%s: flags %q do not strip symbols and DWARF", module, flags)
		}
		if !strings.Contains(flags, "=v") {
			t.Errorf("%s: flags %q stamp no version", module, flags)
		}
	}
}
