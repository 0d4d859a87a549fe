package discovery

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/inventory"
)

// The flag marks GPUs in MIG mode as managed, and refuses, naming the
// flag, the value and why: a GPU not in MIG mode, an unknown UUID, a
// model without MIG rules, an empty or repeated entry, and "all" on a host
// with no GPU in MIG mode.
func TestMarkMIGManaged(t *testing.T) {
	cat := catalog.Default()
	nodes, err := simulated.Parse([]byte(`nodes: [{name: a, gpus: 3xA100-80GB, overrides: [{index: 0, migInstances: [3g.40gb@4]}, {index: 2, migInstances: [7g.80gb]}]}]`), cat)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *inventory.Node {
		n := nodes[0]
		n.GPUs = append([]inventory.GPU(nil), n.GPUs...)
		return &n
	}
	u := func(i int) string { return nodes[0].GPUs[i].UUID }
	managed := func(n *inventory.Node) []bool {
		var out []bool
		for _, g := range n.GPUs {
			out = append(out, g.MIGManaged)
		}
		return out
	}
	for _, tc := range []struct {
		value string
		want  []bool
	}{
		{"", []bool{false, false, false}},
		{"all", []bool{true, false, true}},
		{u(2), []bool{false, false, true}},
		{u(0) + ", " + u(2), []bool{true, false, true}},
	} {
		n := fresh()
		got, err := MarkMIGManaged(n, cat, "--mig-managed", tc.value)
		if err != nil {
			t.Fatalf("%q: %v", tc.value, err)
		}
		if m := managed(n); fmt.Sprint(m) != fmt.Sprint(tc.want) {
			t.Errorf("%q: managed %v, want %v", tc.value, m, tc.want)
		}
		if len(got) != strings.Count(fmt.Sprint(tc.want), "true") {
			t.Errorf("%q: returned %v", tc.value, got)
		}
		if err := n.Validate(); err != nil {
			t.Errorf("%q: marked inventory invalid: %v", tc.value, err)
		}
	}
	for _, tc := range []struct{ value, want string }{
		{u(1), "--mig-managed " + u(1) + ": GPU 1 (" + u(1) + ", A100-80GB) is not in MIG mode (MIG mode Disabled); Tessera never switches MIG mode"},
		{"GPU-nope", "--mig-managed GPU-nope: GPU-nope is not a GPU of this host (its GPUs: " + u(0)},
		{u(0) + ",", `--mig-managed: must be all or a comma-separated list of GPU UUIDs, got "` + u(0) + `," (an empty entry)`},
		{u(0) + "," + u(0), "is listed twice"},
	} {
		if _, err := MarkMIGManaged(fresh(), cat, "--mig-managed", tc.value); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.value, err, tc.want)
		}
	}
	plain, err := simulated.FromSpec("2xA100-80GB", cat)
	if err != nil {
		t.Fatal(err)
	}
	pn := plainNodes(t, plain)
	if _, err := MarkMIGManaged(&pn, cat, "--mig-managed", "all"); err == nil || !strings.Contains(err.Error(), "--mig-managed all: none of this host's 2 GPUs is in MIG mode") {
		t.Errorf("all without MIG GPUs: %v", err)
	}
}

func plainNodes(t *testing.T, s Source) inventory.Node {
	t.Helper()
	nodes, err := s.Discover(t.Context())
	if err != nil || len(nodes) != 1 {
		t.Fatalf("discover: %v, %d nodes", err, len(nodes))
	}
	return nodes[0]
}
