package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// "default" names the default policy wherever a policy is named, and every
// output calls it by its canonical name: sim with "default,tessera" runs one
// policy, reported as tessera.
func TestSimPolicyDefaultIsTessera(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := run(t, "sim", "--trace", tinyPods, "--nodes", tinyNodes, "--policy", "default,tessera,Default", "--seeds", "42", "-q", "-o", dir, "--plot-format", "svg")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(out, "| pods | tessera | 1 |") != 1 || strings.Contains(out, "default") {
		t.Errorf("want one tessera row over one seed and no \"default\":\n%s", out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []struct{ Policy string }
	if err := json.Unmarshal(data, &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Policy != "tessera" {
		t.Errorf("summary.json runs %+v: want one run of tessera", runs)
	}
	for _, f := range []string{"curves.csv", "summary.md"} {
		if data, err := os.ReadFile(filepath.Join(dir, f)); err != nil || strings.Contains(string(data), "default") {
			t.Errorf("%s: %v; names the alias:\n%s", f, err, data)
		}
	}
	if _, errOut, code := run(t, "sim", "--trace", tinyPods, "--nodes", tinyNodes, "--policy", "defualt", "-q", "-o", dir); code == 0 || !strings.Contains(errOut, `--policy: unknown policy "defualt"`) || !strings.Contains(errOut, "default") {
		t.Errorf("misspelt alias: exit %d, %q; want the error to offer default", code, errOut)
	}
}

func TestUpPolicyDefault(t *testing.T) {
	host := startUp(t, "1xH200", "--policy", "default").host
	if code, _, errs := tessera(append(append([]string{"run"}, host...), "--gpu-fraction", "0.5", "--", "true")...); code != 0 {
		t.Fatalf("run on up --policy default: exit %d (%s)", code, errs)
	}
}
