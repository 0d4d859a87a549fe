package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestManifestsAreRenderedFromTheChart: deploy/tessera.yaml and
// deploy/webhook.yaml are what `make manifests` renders from the chart
// now, so the chart is their one source.
func TestManifestsAreRenderedFromTheChart(t *testing.T) {
	h := newHelm(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed: it runs the manifests target this test checks (apt-get install make)")
	}
	out := t.TempDir()
	cmd := exec.Command("make", "-s", "--no-print-directory", "manifests", "HELM="+h.bin, "MANIFESTS_DIR="+out)
	cmd.Dir = ".."
	cmd.Env = h.env
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make manifests: %v\n%s", err, msg)
	}
	for _, f := range []string{"tessera.yaml", "webhook.yaml"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/%s differs from the chart's render (first difference: %s); run `make manifests` and commit the result", f, firstDiff(string(got), string(want)))
		}
		if !strings.HasPrefix(string(want), "# Rendered from the chart") {
			t.Errorf("rendered %s lacks the header saying where it comes from", f)
		}
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: checked in %q, rendered %q", i+1, gl, wl)
		}
	}
	return "none"
}
