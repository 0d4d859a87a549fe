package discovery

import (
	"context"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
)

func TestOpen(t *testing.T) {
	cat := catalogtest.Small()
	tests := []struct {
		source, name, err string
	}{
		{source: "sim:2xH200", name: "sim:2xH200"},
		{source: "local", name: "local"},
		{source: "auto", name: "auto"},
		{source: "sim:", err: "sim needs a spec"},
		{source: "sim:9xNope", err: `unknown GPU model "Nope"`},
		{source: "sim:/does/not/exist.yaml", err: "read simulated cluster"},
		{source: "local:x", err: "local takes no argument"},
		{source: "auto:x", err: "auto takes no argument"},
		{source: "kube", err: "not available yet"},
		{source: "", err: "must be one of auto, local, sim:SPEC, sim:FILE.yaml"},
		{source: "gpu", err: "must be one of auto, local, sim:SPEC, sim:FILE.yaml"},
	}
	for _, tc := range tests {
		src, err := Open(tc.source, cat)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Open(%q) error = %v, want %q", tc.source, err, tc.err)
			}
			continue
		}
		if err != nil || src.Name() != tc.name {
			t.Errorf("Open(%q) = %v, %v; want name %q", tc.source, src, err, tc.name)
		}
	}
}

// TestAutoFallsBack runs where no NVIDIA driver exists (CI): auto must
// report a simulated inventory and say so.
func TestAutoFallsBack(t *testing.T) {
	a := NewAuto(catalogtest.Small(), "2xL4")
	nodes, err := a.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !a.Simulated() {
		t.Skip("an NVIDIA driver is present; the fallback is not exercised here")
	}
	if a.Name() != "sim:2xL4" || len(nodes) != 1 || len(nodes[0].GPUs) != 2 {
		t.Fatalf("auto fallback: name %q nodes %+v", a.Name(), nodes)
	}
	bad := NewAuto(catalogtest.Small(), "2xNope")
	if _, err := bad.Discover(context.Background()); err == nil || !strings.Contains(err.Error(), "simulated fallback is invalid") {
		t.Fatalf("invalid fallback: err = %v", err)
	}
}
