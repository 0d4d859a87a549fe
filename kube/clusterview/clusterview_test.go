package clusterview

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
	"github.com/tessera-gpu/tessera/webui"
)

type fakeViewer struct {
	v  View
	ok bool
}

func (f fakeViewer) View() (View, bool)           { return f.v, f.ok }
func (f fakeViewer) ViewChanged() <-chan struct{} { return nil }

func share(uuid string, index int, milli, limit, mem int64) binding.Share {
	return binding.Share{UUID: uuid, Index: index, ComputeMilli: milli, ComputeLimitMilli: limit, MemoryMiB: mem, MemoryLimitMiB: mem}
}

func pod(name, queue string, shares ...binding.Share) PodView {
	p := PodView{Namespace: "ns", Name: name, Queue: queue, Created: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)}
	if len(shares) > 0 {
		p.Assignment = &binding.Assignment{Node: "n1", Containers: []binding.Container{{Name: "main", GPUs: shares}}}
		p.Requests = []request.GPU{{Count: len(shares), ComputeMilli: shares[0].ComputeMilli, ComputeLimitMilli: shares[0].ComputeLimitMilli, MemoryMiB: shares[0].MemoryMiB}}
	}
	return p
}

// view is a node with a shared GPU (two pods), a MIG GPU (one instance in
// use), an unhealthy GPU, a node read from labels, two queues and two
// waiting pods, one with the scheduler's reason and one not tried yet.
func view() View {
	gpu := func(uuid string, index int, mem int64) inventory.GPU {
		return inventory.GPU{UUID: uuid, Index: index, Model: "H100-SXM", MemoryMiB: mem, Health: inventory.Healthy}
	}
	g0, g1, g2 := gpu("GPU-a", 0, 81920), gpu("GPU-b", 1, 81920), gpu("GPU-c", 2, 81920)
	g1.MIGMode, g1.MIGInstances = inventory.MIGEnabled, []inventory.MIGInstance{{UUID: "MIG-1", Profile: "3g.40gb", MemoryMiB: 40960}, {UUID: "MIG-2", Profile: "3g.40gb", MemoryMiB: 40960}}
	g2.Health, g2.HealthReason = inventory.Unhealthy, "XID 79"
	a := pod("a", "research", share("GPU-a", 0, 500, 800, 20480))
	b := pod("b", "default", share("GPU-a", 0, 250, 500, 10240))
	m := pod("m", "research", binding.Share{UUID: "MIG-2", Index: 1, ComputeMilli: 500, ComputeLimitMilli: 500, MemoryMiB: 40960, MemoryLimitMiB: 40960, MIGProfile: "3g.40gb", MIG: &binding.MIGInstance{GPU: "GPU-b", Start: 4}})
	m.Started = time.Date(2026, 1, 2, 3, 1, 0, 0, time.UTC)
	waits := pod("waits", "default")
	waits.Requests = []request.GPU{{Count: 4, ComputeMilli: 1000, ComputeLimitMilli: 1000}}
	waits.Reason, waits.Message = "Unschedulable", "no node fits 4 GPU(s) at compute 1000/1000 for ns/waits/main: 2 node(s) too few GPUs"
	fresh := pod("fresh", "research")
	fresh.Requests = []request.GPU{{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250}}
	return View{
		Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Scheduler: "tessera", Policy: "binpack",
		Nodes: []NodeView{
			{Name: "n1", Source: "nvml", Ready: true, CPUMilli: 32000, FreeCPUMilli: 29000, MemoryMiB: 131072, FreeMemoryMiB: 131072, Pods: []PodView{a, b, m},
				GPUs: []GPUView{
					{GPU: g0, Schedulable: true, FreeMilli: 250, FreeMemoryMiB: 81920 - 30720},
					{GPU: g1, Schedulable: true, FreeMilli: 500, FreeMemoryMiB: 40960},
					{GPU: g2},
				}},
			{Name: "n2", Source: "node-labels", Unschedulable: true, GPUs: []GPUView{{GPU: gpu("n2/gpu0", 0, 81920), Schedulable: true, FreeMilli: 1000, FreeMemoryMiB: 81920}}},
		},
		Queues: []QueueView{
			{Queue: queueing.Queue{Name: "default", Weight: 1}, Used: queueing.Resources{GPUMilli: 250}, Share: 1.25, Running: 1, Waiting: 1},
			{Queue: queueing.Queue{Name: "research", Weight: 2, Guaranteed: queueing.Resources{GPUMilli: 2000}}, Configured: true, Used: queueing.Resources{GPUMilli: 1000, GPUMemoryMiB: 61440}, Share: 0.5, Running: 2, Waiting: 1},
		},
		Pending: []PodView{waits, fresh},
	}
}

// TestTranslate: every figure on the page is the view's: a GPU's
// guaranteed allocation and memory booked are placement's books (capacity
// less what it still offers), its burst limit the sum of its shares'
// limits capped at one GPU, each pod's share lies on its GPU (a MIG share
// on its parent, marking the instance in use), an unhealthy GPU counts its
// shares and is noted, a node read from labels reports no memory in use
// and is noted, queues and waiting pods (with the scheduler's words, in
// its order) are carried over.
func TestTranslate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	s := Translate(view(), now)
	if s.Scope != "cluster" || !s.Time.Equal(now) || !strings.Contains(s.Source, "policy binpack") || !strings.Contains(s.Source, "2 nodes") {
		t.Errorf("header: %q %q %v", s.Scope, s.Source, s.Time)
	}
	if len(s.GPUs) != 4 {
		t.Fatalf("%d GPUs, want 4", len(s.GPUs))
	}
	g := s.GPUs[0]
	if g.Node != "n1" || g.GuaranteedMilli != 750 || g.LimitMilli != 1000 || g.MemoryBookedMiB != 30720 || g.MeasuredMilli != nil {
		t.Errorf("GPU 0: %+v", g)
	}
	if len(g.Shares) != 2 || g.Shares[0].Workload != "ns/a" || g.Shares[0].GuaranteedMilli != 500 || g.Shares[0].LimitMilli != 800 || g.Shares[1].Workload != "ns/b" {
		t.Errorf("GPU 0 shares: %+v", g.Shares)
	}
	mig := s.GPUs[1]
	if len(mig.Shares) != 1 || mig.Shares[0].MIGProfile != "3g.40gb" || mig.GuaranteedMilli != 500 || len(mig.MIG) != 2 || mig.MIG[0].InUse || !mig.MIG[1].InUse {
		t.Errorf("MIG GPU: %+v", mig)
	}
	if bad := s.GPUs[2]; bad.Health != "Unhealthy" || bad.HealthReason != "XID 79" || !bad.Unschedulable || bad.GuaranteedMilli != 0 {
		t.Errorf("unhealthy GPU: %+v", bad)
	}
	if l := s.GPUs[3]; l.GuaranteedMilli != 0 || l.MemoryBookedMiB != 0 {
		t.Errorf("labelled GPU: %+v", l)
	}
	if s.Fragmentation != nil {
		t.Errorf("fragmentation %+v without typical pods", s.Fragmentation)
	}
	fv := view()
	fv.Typical, fv.FragmentationMilli = 3, 249.6
	if f := Translate(fv, now).Fragmentation; f == nil || f.Milli != 250 || f.FreeMilli != 250+500+1000 || f.TypicalShapes != 3 {
		t.Errorf("fragmentation %+v, want 250 of the schedulable GPUs' 1750 free, 3 shapes", f)
	}
	notes := strings.Join(s.Notes, "\n")
	for _, want := range []string{"not measured", "1 node(s) have no GPUNode object", "(n2)", "n1 GPU 2"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if len(s.Nodes) != 2 || s.Nodes[0].Pods != 3 || s.Nodes[0].FreeCPUMilli != 29000 || !s.Nodes[1].Cordoned || s.Nodes[1].Ready {
		t.Errorf("nodes: %+v", s.Nodes)
	}
	if len(s.Queues) != 2 || s.Queues[1].Name != "research" || s.Queues[1].Share != 0.5 || s.Queues[1].GuaranteedMilli != 2000 || s.Queues[1].UsedMilli != 1000 || s.Queues[1].UsedMemoryMiB != 61440 || s.Queues[1].Weight != 2 || !s.Queues[1].Configured || s.Queues[0].Configured {
		t.Errorf("queues: %+v", s.Queues)
	}
	v := view()
	if len(s.Pending) != 2 || s.Pending[0].ID != "ns/waits" || s.Pending[0].Position != 1 || s.Pending[0].Reason != v.Pending[0].Message || s.Pending[0].Request != "4 GPU" {
		t.Errorf("pending[0]: %+v", s.Pending[0])
	}
	if p := s.Pending[1]; p.ID != "ns/fresh" || !strings.Contains(p.Reason, "not tried yet") || p.Request != "1x 0.25 GPU" {
		t.Errorf("pending[1]: %+v", p)
	}
	states := map[string]string{}
	for _, w := range s.Workloads {
		states[w.ID] = w.State
	}
	want := map[string]string{"ns/a": webui.StateRunning, "ns/b": webui.StateRunning, "ns/m": webui.StateRunning, "ns/waits": webui.StateQueued, "ns/fresh": webui.StateQueued}
	for id, st := range want {
		if states[id] != st {
			t.Errorf("workload %s: state %q, want %q", id, states[id], st)
		}
	}

	// Through the UI: the totals and each node's capacity follow the GPUs.
	u := webui.New(Source{Viewer: fakeViewer{v: v, ok: true}, Now: func() time.Time { return now }}, webui.Options{Scope: "cluster"})
	got, err := u.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Totals.GPUs != 4 || got.Totals.GuaranteedMilli != 750+500 || got.Totals.Running != 3 || got.Totals.Waiting != 2 {
		t.Errorf("totals: %+v", got.Totals)
	}
	if n := got.Nodes[0]; n.GPUs != 3 || n.GPU.CapacityMilli != 3000 || n.GPU.GuaranteedMilli != 1250 {
		t.Errorf("node n1 capacity: %+v", n)
	}
}

// TestNoView: before the first cycle the source says why there is nothing.
func TestNoView(t *testing.T) {
	_, err := Source{Viewer: fakeViewer{}}.Snapshot(context.Background())
	if !errors.Is(err, ErrNoView) || !errors.Is(err, webui.ErrNoState) {
		t.Fatalf("err %v, want ErrNoView (a webui.ErrNoState)", err)
	}
}
