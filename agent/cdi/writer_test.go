package cdi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl"
	"github.com/tessera-gpu/tessera/migctl/migsim"
)

// The writer adds an instance created after the spec was written, with
// its caps nodes, and drops it again; a UUID NVML does not know fails and
// leaves the spec as it was; the node's own units are never dropped.
func TestWriterAddsAndRemovesCreatedInstances(t *testing.T) {
	m, _ := catalog.Default().Lookup("H100-SXM")
	gpu := migsim.NewGPU(m.MIG, "GPU-h", 2)
	lib := &migsim.Lib{GPUs: []*migsim.GPU{gpu}}
	root := t.TempDir()
	for p, data := range map[string]string{"dev/nvidiactl": "", cdi.MIGMinorsFile[1:]: lib.MIGMinors()} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	node := inventory.Node{Name: "n", GPUs: []inventory.GPU{{UUID: "GPU-h", Index: 0, Model: "H100-SXM", MemoryMiB: 81559, MIGMode: inventory.MIGEnabled, MIGManaged: true}}}
	w, err := cdi.NewWriter(lib, node, cdi.Options{Dir: filepath.Join(root, "cdi"), HostRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		data, err := os.ReadFile(w.Path())
		if err != nil {
			t.Fatal(err)
		}
		var s cdi.Spec
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range s.Devices {
			var nodes []string
			for _, n := range d.ContainerEdits.DeviceNodes {
				nodes = append(nodes, n.Path)
			}
			out = append(out, d.Name+"="+strings.Join(nodes, ","))
		}
		return strings.Join(out, " ")
	}
	if got := read(); got != "GPU-h=/dev/nvidia2" {
		t.Fatalf("spec at start %q", got)
	}
	inst, err := migctl.Create(gpu, m.MIG, "3g.40gb", 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(inst.UUID, "GPU-h"); err != nil {
		t.Fatal(err)
	}
	minors, _ := cdi.ParseMIGMinors(strings.NewReader(lib.MIGMinors()))
	want := "GPU-h=/dev/nvidia2 " + inst.UUID + "=/dev/nvidia2,/dev/nvidia-caps/nvidia-cap" + strconv.Itoa(minors["gpu2/gi1/access"]) + ",/dev/nvidia-caps/nvidia-cap" + strconv.Itoa(minors["gpu2/gi1/ci0/access"])
	if got := read(); got != want {
		t.Fatalf("spec after Add %q, want %q", got, want)
	}
	if err := w.Add("MIG-unknown"); err == nil || !strings.Contains(err.Error(), "locate MIG-unknown") {
		t.Errorf("add of an unknown instance: %v", err)
	}
	if got := read(); got != want {
		t.Errorf("spec after a failed Add %q, want it unchanged", got)
	}
	if err := w.Remove(inst.UUID, "GPU-h"); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "GPU-h=/dev/nvidia2" {
		t.Errorf("spec after Remove %q, want the GPU only", got)
	}
}
