package setup

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/migctl"
)

// On a simulated node, --mig-managed marks the GPUs in the inventory the
// agent publishes and gives the agent a manager whose simulated driver
// holds the configured instances: a slot they occupy is refused, a free
// one is created. A GPU not in MIG mode is refused, naming the flag.
func TestMIGManagerOnSimulatedNode(t *testing.T) {
	cat := catalog.Default()
	nodes, err := simulated.Parse([]byte(`nodes: [{name: a, gpus: 2xA100-80GB, overrides: [{index: 0, migInstances: [3g.40gb@4]}]}]`), cat)
	if err != nil {
		t.Fatal(err)
	}
	node := nodes[0]
	o := Options{MIGManaged: "all", Catalog: cat, Log: slog.New(slog.DiscardHandler)}
	mgr, closeMIG, err := migManager(&node, false, o)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMIG()
	if !node.GPUs[0].MIGManaged || node.GPUs[1].MIGManaged {
		t.Fatalf("managed: %v, %v; want GPU 0 only", node.GPUs[0].MIGManaged, node.GPUs[1].MIGManaged)
	}
	parent := node.GPUs[0].UUID
	if _, err := mgr.Acquire("w1", migctl.Want{GPU: parent, Profile: "2g.20gb", Start: 4}); err == nil {
		t.Error("a slot the configured 3g.40gb occupies was created")
	}
	if in, err := mgr.Acquire("w2", migctl.Want{GPU: parent, Profile: "4g.40gb", Start: 0}); err != nil || in.UUID == "" {
		t.Errorf("free slot: %+v, %v", in, err)
	}
	node = nodes[0]
	o.MIGManaged = node.GPUs[1].UUID
	if _, _, err := migManager(&node, false, o); err == nil || !strings.Contains(err.Error(), "--mig-managed "+node.GPUs[1].UUID+": GPU 1") || !strings.Contains(err.Error(), "not in MIG mode") {
		t.Errorf("GPU not in MIG mode: %v", err)
	}
	node = nodes[0]
	o.MIGManaged = ""
	if mgr, _, err := migManager(&node, false, o); err != nil || mgr != nil {
		t.Errorf("no managed GPUs: %v, %v", mgr, err)
	}
}
