package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/nvmlgpu"
	"github.com/tessera-gpu/tessera/inventory"
)

func TestAgentStandalonePrintsTheInventory(t *testing.T) {
	out, errOut, code := run(t, "agent", "--standalone", "--source", "sim:2xH200")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var nodes []inventory.Node
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(nodes) != 1 || len(nodes[0].GPUs) != 2 || nodes[0].GPUs[0].Model != "H200" {
		t.Fatalf("inventory = %+v", nodes)
	}
	_, errOut, code = run(t, "agent", "--standalone", "--source", "sim:2xNope")
	if code == 0 || !strings.Contains(errOut, `--source: GPU spec "2xNope": unknown GPU model "Nope"`) {
		t.Fatalf("bad source: exit %d, %s", code, errOut)
	}
	// Without a driver (as in CI), local discovery fails clearly. With one,
	// the health watch runs until interrupted: that is the GPU batch's job.
	if _, err := nvmlgpu.New(catalog.Default()).Discover(context.Background()); err == nil {
		return
	}
	_, errOut, code = run(t, "agent", "--standalone", "--source", "local")
	if code == 0 || !strings.Contains(errOut, "NVML is not available") {
		t.Fatalf("local without a driver: exit %d, %s", code, errOut)
	}
}
