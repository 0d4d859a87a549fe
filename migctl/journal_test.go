package migctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/migctl/migsim"
)

// journalPeek is a GPU whose driver reads the manager's journal at the
// moment it is asked to create a GPU instance.
type journalPeek struct {
	*migsim.GPU
	path string
	seen []string
}

func (j *journalPeek) CreateGpuInstanceWithPlacement(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	data, _ := os.ReadFile(j.path)
	j.seen = append(j.seen, string(data))
	return j.GPU.CreateGpuInstanceWithPlacement(info, pl)
}

// An instance is in the journal before the driver creates it, so a
// manager that dies right after the creation (before its workload was
// recorded anywhere) leaves a record: the next manager, told no workload
// wants it, destroys it; an instance a running workload still wants is
// adopted, and one the operator made is left alone.
func TestJournalSettlesACrashMidCreation(t *testing.T) {
	sp := spec(t, "H100-SXM")
	path := filepath.Join(t.TempDir(), "mig.json")
	g := migsim.NewGPU(sp, "GPU-j", 0)
	peek := &journalPeek{GPU: g, path: path}
	if _, err := Create(g, sp, "1g.10gb", 6); err != nil { // the operator's
		t.Fatal(err)
	}
	m := NewManager([]GPU{{UUID: "GPU-j", Device: peek, Spec: sp}})
	if prev, err := m.Journal(path); err != nil || len(prev) != 0 {
		t.Fatalf("fresh journal: %v, %v", prev, err)
	}
	if _, err := m.Acquire("crashed", Want{GPU: "GPU-j", Profile: "3g.40gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire("runs", Want{GPU: "GPU-j", Profile: "2g.20gb", Start: 4}); err != nil {
		t.Fatal(err)
	}
	if len(peek.seen) != 2 || !strings.Contains(peek.seen[0], `"crashed"`) || !strings.Contains(peek.seen[1], `"runs"`) {
		t.Fatalf("journal when the driver was asked: %q", peek.seen)
	}
	// The agent dies; "crashed" was never recorded as a workload.
	m2 := NewManager([]GPU{{UUID: "GPU-j", Device: g, Spec: sp}})
	prev, err := m2.Journal(path)
	if err != nil {
		t.Fatal(err)
	}
	wanted := map[string][]Want{"runs": {{GPU: "GPU-j", Profile: "2g.20gb", Start: 4}}}
	rep, err := m2.Reconcile(wanted, Ended(prev, wanted))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Adopted) != 1 || len(rep.Destroyed) != 1 || !strings.HasPrefix(rep.Destroyed[0], "crashed:") || len(rep.Created) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if got := g.Layout(); got != "2g.20gb@4 1g.10gb@6" {
		t.Errorf("layout %q, want the running workload's and the operator's instances", got)
	}
	again, err := NewManager(nil).Journal(path)
	if err != nil || len(again) != 1 || len(again["runs"]) != 1 {
		t.Errorf("journal after reconcile: %v, %v; want the running workload only", again, err)
	}
	if err := m2.Release("runs"); err != nil {
		t.Fatal(err)
	}
	if again, _ := NewManager(nil).Journal(path); len(again) != 0 {
		t.Errorf("journal after the release: %v", again)
	}
}

// A journal the manager cannot write refuses the creation before the
// driver is asked: an unrecorded instance could leak.
func TestJournalUnwritableRefusesCreation(t *testing.T) {
	sp := spec(t, "H100-SXM")
	g := migsim.NewGPU(sp, "GPU-j", 0)
	m := NewManager([]GPU{{UUID: "GPU-j", Device: g, Spec: sp}})
	if _, err := m.Journal(filepath.Join(t.TempDir(), "missing-folder", "mig.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire("w", Want{GPU: "GPU-j", Profile: "1g.10gb", Start: 0}); err == nil || !strings.Contains(err.Error(), "MIG journal") {
		t.Fatalf("acquire with an unwritable journal: %v", err)
	}
	if len(g.Calls()) != 0 || len(m.Workloads()) != 0 {
		t.Errorf("driver calls %v, workloads %v: want none", g.Calls(), m.Workloads())
	}
	if _, err := m.Journal("relative.json"); err == nil || !strings.Contains(err.Error(), `must be an absolute path, got "relative.json"`) {
		t.Errorf("relative journal: %v", err)
	}
}

// notMIG is a GPU whose MIG mode is off.
type notMIG struct{ *migsim.GPU }

func (notMIG) GetMigMode() (int, int, nvml.Return) {
	return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS
}

type libWith struct {
	*migsim.Lib
	extra map[string]nvml.Device
}

func (l libWith) DeviceGetHandleByUUID(uuid string) (nvml.Device, nvml.Return) {
	if d, ok := l.extra[uuid]; ok {
		return d, nvml.SUCCESS
	}
	return l.Lib.DeviceGetHandleByUUID(uuid)
}

// Open finds managed GPUs by UUID and refuses one NVML does not know or
// one not in MIG mode, naming it.
func TestOpen(t *testing.T) {
	sp := spec(t, "A100-80GB")
	g := migsim.NewGPU(sp, "GPU-a", 0)
	lib := libWith{Lib: &migsim.Lib{GPUs: []*migsim.GPU{g}}, extra: map[string]nvml.Device{"GPU-off": notMIG{migsim.NewGPU(sp, "GPU-off", 1)}}}
	gpus, err := Open(lib, map[string]*catalog.MIGSpec{"GPU-a": sp})
	if err != nil || len(gpus) != 1 || gpus[0].UUID != "GPU-a" || gpus[0].Device != nvml.Device(g) || gpus[0].Spec != sp {
		t.Fatalf("open: %+v, %v", gpus, err)
	}
	for uuid, want := range map[string]string{"GPU-off": "GPU-off: not in MIG mode", "GPU-none": "GPU-none: DeviceGetHandleByUUID"} {
		if _, err := Open(lib, map[string]*catalog.MIGSpec{uuid: sp}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("open %s: %v, want %q", uuid, err, want)
		}
	}
}
