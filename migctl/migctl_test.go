package migctl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/migctl/migsim"
)

func spec(t *testing.T, model string) *catalog.MIGSpec {
	t.Helper()
	m, ok := catalog.Default().Lookup(model)
	if !ok || !m.SupportsMIG() {
		t.Fatalf("%s: no MIG geometry", model)
	}
	return m.MIG
}

// Create makes the GPU instance at the chosen start and its compute
// instance, and names the MIG device; every profile of the A100-80GB and
// H100 at each of its starts on an empty GPU.
func TestCreateEveryProfileAndStart(t *testing.T) {
	for _, model := range []string{"A100-80GB", "H100-SXM", "A30"} {
		sp := spec(t, model)
		for _, p := range sp.Profiles {
			for _, s := range p.Starts {
				f := migsim.NewGPU(sp, "GPU-x", 0)
				inst, err := Create(f, sp, p.Name, s)
				if err != nil {
					t.Fatalf("%s %s@%d: %v", model, p.Name, s, err)
				}
				if inst.Start != s || inst.Profile != p.Name || !strings.HasPrefix(inst.UUID, "MIG-GPU-x-") || f.Layout() != fmt.Sprintf("%s@%d", p.Name, s) {
					t.Fatalf("%s %s@%d: %+v, layout %s", model, p.Name, s, inst, f.Layout())
				}
				if err := Destroy(f, sp, p.Name, s); err != nil || f.Layout() != "" {
					t.Fatalf("%s %s@%d destroy: %v, left %s", model, p.Name, s, err, f.Layout())
				}
			}
		}
	}
}

// Failures leave nothing behind: a refused GPU instance, a start the
// catalog does not allow, a slot already taken, and a driver error between
// the GPU instance and its compute instance (the GPU instance is destroyed);
// when even that destroy fails the error says what was left.
func TestCreateFailuresLeakNothing(t *testing.T) {
	sp := spec(t, "A100-80GB")
	tests := []struct {
		name    string
		setup   func(f *migsim.GPU)
		profile string
		start   int
		want    string
		left    string
	}{
		{"creation refused", func(f *migsim.GPU) { f.Fail(migsim.CreateGPUInstance, nvml.ERROR_INSUFFICIENT_RESOURCES) }, "3g.40gb", 4, "create GPU instance 3g.40gb at slice 4", ""},
		{"start not valid", nil, "3g.40gb", 2, "create GPU instance 3g.40gb at slice 2", ""},
		{"slot taken", func(f *migsim.GPU) {
			if _, err := Create(f, sp, "4g.40gb", 0); err != nil {
				panic(err)
			}
		}, "2g.20gb", 2, "at slice 2", "4g.40gb@0"},
		{"driver error mid-way", func(f *migsim.GPU) { f.Fail(migsim.CreateComputeInstance, nvml.ERROR_UNKNOWN) }, "2g.20gb", 4, "create compute instance of 2g.20gb at slice 4", ""},
		{"mid-way and the undo fails", func(f *migsim.GPU) {
			f.Fail(migsim.CreateComputeInstance, nvml.ERROR_UNKNOWN)
			f.Fail(migsim.DestroyGPUInstance, nvml.ERROR_UNKNOWN)
		}, "2g.20gb", 4, "left behind", "2g.20gb@4"},
		{"profile of another model", nil, "1g.18gb", 0, "not a profile of this GPU", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := migsim.NewGPU(sp, "GPU-x", 0)
			if tt.setup != nil {
				tt.setup(f)
			}
			_, err := Create(f, sp, tt.profile, tt.start)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if got := f.Layout(); got != tt.left {
				t.Errorf("layout after the failure %q, want %q", got, tt.left)
			}
		})
	}
}

// A workload's instance is created once and destroyed when it ends; a
// slot another workload holds is refused before the driver is asked; an
// instance in use at release stays booked and is destroyed by a later
// release.
func TestManagerBooksByWorkload(t *testing.T) {
	sp := spec(t, "H100-SXM")
	f := migsim.NewGPU(sp, "GPU-h", 0)
	m := NewManager([]GPU{{UUID: "GPU-h", Device: f, Spec: sp}})
	a, err := m.Acquire("pod-a", Want{GPU: "GPU-h", Profile: "3g.40gb", Start: 4})
	if err != nil {
		t.Fatal(err)
	}
	again, err := m.Acquire("pod-a", Want{GPU: "GPU-h", Profile: "3g.40gb", Start: 4})
	if err != nil || again != a || f.Layout() != "3g.40gb@4" {
		t.Fatalf("second acquire: %+v, %v; layout %s", again, err, f.Layout())
	}
	calls := len(f.Calls())
	if _, err := m.Acquire("pod-b", Want{GPU: "GPU-h", Profile: "1g.10gb", Start: 6}); err == nil || !strings.Contains(err.Error(), "pod-a") {
		t.Fatalf("overlapping slot: %v, want a refusal naming pod-a", err)
	}
	if len(f.Calls()) != calls {
		t.Errorf("the driver was asked for a slot already booked: %v", f.Calls()[calls:])
	}
	for _, w := range []Want{{GPU: "GPU-other", Profile: "1g.10gb"}, {GPU: "GPU-h", Profile: "1g.18gb"}} {
		if _, err := m.Acquire("pod-c", w); err == nil {
			t.Errorf("acquire %+v: no error", w)
		}
	}
	b, err := m.Acquire("pod-b", Want{GPU: "GPU-h", Profile: "1g.10gb", Start: 0})
	if err != nil || b.UUID == a.UUID {
		t.Fatalf("pod-b: %+v, %v", b, err)
	}
	// pod-a's process still runs: its instance stays, booked.
	if !f.SetBusy(4, true) {
		t.Fatal("no instance at 4")
	}
	if err := m.Release("pod-a"); !errors.Is(err, ErrInUse) {
		t.Fatalf("release of a busy instance: %v, want ErrInUse", err)
	}
	if got := f.Layout(); got != "1g.10gb@0 3g.40gb@4" {
		t.Fatalf("layout %q after a refused release", got)
	}
	if _, err := m.Acquire("pod-c", Want{GPU: "GPU-h", Profile: "3g.40gb", Start: 4}); err == nil {
		t.Fatal("a busy instance's slot was handed to another workload")
	}
	f.SetBusy(4, false)
	if err := m.Release("pod-a"); err != nil {
		t.Fatal(err)
	}
	if err := m.Release("pod-b"); err != nil {
		t.Fatal(err)
	}
	if got := f.Layout(); got != "" || len(m.Holds("pod-a")) != 0 {
		t.Fatalf("after release: layout %q, pod-a holds %v", got, m.Holds("pod-a"))
	}
}

// After a restart, Reconcile adopts the instances running workloads hold
// (no driver call creates or destroys them), creates the missing ones,
// destroys those of ended workloads unless in use, and leaves unknown
// instances (the operator's) alone.
func TestReconcile(t *testing.T) {
	sp := spec(t, "A100-80GB")
	f := migsim.NewGPU(sp, "GPU-a", 0)
	for _, c := range []struct {
		p string
		s int
	}{{"3g.40gb", 4}, {"1g.10gb", 0}, {"1g.10gb", 1}, {"1g.10gb", 2}} {
		if _, err := Create(f, sp, c.p, c.s); err != nil {
			t.Fatal(err)
		}
	}
	if !f.SetBusy(1, true) {
		t.Fatal("no instance at 1")
	}
	before := len(f.Calls())
	m := NewManager([]GPU{{UUID: "GPU-a", Device: f, Spec: sp}})
	rep, err := m.Reconcile(
		map[string][]Want{"run": {{GPU: "GPU-a", Profile: "3g.40gb", Start: 4}}, "new": {{GPU: "GPU-a", Profile: "1g.10gb", Start: 3}}},
		map[string][]Want{"gone": {{GPU: "GPU-a", Profile: "1g.10gb", Start: 0}}, "busy": {{GPU: "GPU-a", Profile: "1g.10gb", Start: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Adopted) != 1 || !strings.HasPrefix(rep.Adopted[0], "run:") || len(rep.Created) != 1 || len(rep.Destroyed) != 1 || len(rep.Busy) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if got := f.Layout(); got != "1g.10gb@1 1g.10gb@2 1g.10gb@3 3g.40gb@4" {
		t.Errorf("layout %q", got)
	}
	if h := m.Holds("run"); len(h) != 1 || h[0].UUID == "" {
		t.Errorf("adopted instance %+v, want its UUID", h)
	}
	if _, err := m.Acquire("other", Want{GPU: "GPU-a", Profile: "1g.10gb", Start: 1}); err == nil {
		t.Error("the busy instance's slot was handed out")
	}
	for _, c := range f.Calls()[before:] {
		if strings.HasPrefix(c, "createGI(") && !strings.HasSuffix(c, "@3)") {
			t.Errorf("unexpected driver call %s", c)
		}
	}
}
