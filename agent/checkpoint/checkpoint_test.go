package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/binding"
)

func entry(key string, ids ...string) Entry {
	e := Entry{Key: key, DeviceIDs: ids, Namespace: "ns", Pod: "p-" + key, Container: "c"}
	for range ids {
		e.GPUs = append(e.GPUs, binding.Share{UUID: "GPU-0", ComputeMilli: 1, ComputeLimitMilli: 1, MemoryMiB: 1, MemoryLimitMiB: 1})
	}
	return e
}

func TestStoreSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "allocations.json")
	s, err := Open(path, "n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entry{entry("k1", "d1"), entry("k2", "d2", "d3")} {
		if err := s.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(entry("k3", "d3")); err != nil { // d3 moved on: k2 is stale
		t.Fatal(err)
	}
	re, err := Open(path, "n1")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range re.Entries() {
		keys = append(keys, e.Key)
	}
	if strings.Join(keys, ",") != "k1,k3" {
		t.Errorf("after reopen: %v, want k1,k3", keys)
	}
	if _, ok := re.ByDevices([]string{"d3"}); !ok {
		t.Errorf("ByDevices(d3) not found")
	}
	if err := re.Remove("k1"); err != nil || len(re.Entries()) != 1 {
		t.Errorf("Remove: %v, %d left", err, len(re.Entries()))
	}
	left, _ := os.ReadDir(filepath.Dir(path))
	if len(left) != 1 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestLoadRejectsWhatItDoesNotUnderstand(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"version": `{"version":2,"entries":[]}`,
		"entry":   `{"version":1,"entries":[{"key":"k","deviceIDs":[]}]}`,
		"json":    `{`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		if _, err := Load(p); err == nil {
			t.Errorf("%s: Load accepted %s", name, content)
		}
	}
	p := filepath.Join(dir, "other")
	if err := Save(p, File{Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, "n2"); err == nil || !strings.Contains(err.Error(), `belongs to node "n1"`) {
		t.Errorf("Open of another node's checkpoint: %v", err)
	}
}
