package clusterview

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/clusterinv"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
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
	for _, want := range []string{"No node publishes GPU use", "1 node(s) have no GPUNode object", "(n2)", "n1 GPU 2"} {
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

// published is n1's GPUUse as its agent would publish it at at: pod a
// measured on GPU-a, pod b measured and idle on it (idle set), pod m
// simulated on GPU-b's MIG instance, GPU-c held by no pod.
func published(at time.Time, idle bool) nodeuse.Status {
	ms := func(v int64) *int64 { return &v }
	a := gpuuse.Share{Workload: "ns/a", GPU: "GPU-a", Booked: gpuuse.Booked{GuaranteedMilli: 500, LimitMilli: 800},
		Use: gpuuse.Use{Source: gpuuse.Measured, BusyMilli: ms(420), From: at.Add(-10 * time.Second), At: at, MemoryUsedMiB: ms(12000)}}
	b := gpuuse.Share{Workload: "ns/b", GPU: "GPU-a", Booked: gpuuse.Booked{GuaranteedMilli: 250, LimitMilli: 500},
		Use: gpuuse.Use{Source: gpuuse.Measured, BusyMilli: ms(10), From: at.Add(-10 * time.Second), At: at, MemoryUsedMiB: ms(300)}}
	if idle {
		b.Idle = &gpuuse.Idle{Since: at.Add(-11 * time.Minute)}
	}
	m := gpuuse.Share{Workload: "ns/m", GPU: "GPU-b", Index: 1, Booked: gpuuse.Booked{GuaranteedMilli: 500, LimitMilli: 500},
		Use: gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: ms(250), From: at.Add(-10 * time.Second), At: at}}
	g0 := gpuuse.GPU{GPU: "GPU-a", Shares: []gpuuse.Share{a, b}}
	g1 := gpuuse.GPU{GPU: "GPU-b", Index: 1, Shares: []gpuuse.Share{m}}
	g2 := gpuuse.GPU{GPU: "GPU-c", Index: 2}
	for _, g := range []*gpuuse.GPU{&g0, &g1, &g2} {
		g.Sum("no pod holds it")
	}
	return nodeuse.Status{Source: "nvml", At: at, Rule: nodeuse.Rule{WindowSeconds: 10, IdleBelowMilli: 50, IdleAfterSeconds: 600, Metered: true}, GPUs: []gpuuse.GPU{g0, g1, g2}}
}

// useView is view() with n1's GPUUse object read as the scheduler reads
// it (ReadUse), and an object that does not read.
func useView(t *testing.T, st nodeuse.Status) View {
	t.Helper()
	v := view()
	obj, err := nodeuse.Object("n1", st)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := nodeuse.Object("n3", nodeuse.Status{GPUs: []gpuuse.GPU{{GPU: "x", Use: gpuuse.Use{Source: "guessed"}}}})
	if err != nil {
		t.Fatal(err)
	}
	v.ReadUse([]*unstructured.Unstructured{obj, bad}, nil)
	return v
}

// TestTranslateUse: each GPU shows the use its node's agent published
// (measured, or simulated and labelled so, never one for the other), each
// pod's share its own use, memory in use and idle mark, a pod idle on
// every GPU it holds is flagged and one not idle is not, each queue sums
// its pods' use (measured and simulated apart); a node without a GPUUse,
// a GPUUse older than clusterinv.StaleUse and a pod the GPUUse does not
// list yet are not metered and say why; an object that does not read is
// noted.
func TestTranslateUse(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	now := at.Add(5 * time.Second)
	u := webui.New(Source{Viewer: fakeViewer{v: useView(t, published(at, true)), ok: true}, Now: func() time.Time { return now }}, webui.Options{Scope: "cluster"})
	s, err := u.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gpus := map[string]webui.GPU{}
	for _, g := range s.GPUs {
		gpus[g.UUID] = g
	}
	g0, g1 := gpus["GPU-a"], gpus["GPU-b"]
	if g0.MeasuredMilli == nil || *g0.MeasuredMilli != 430 || g0.SimulatedMilli != nil || g0.Use == nil || *g0.Use.MemoryUsedMiB != 12300 {
		t.Errorf("GPU-a use %+v measured %v simulated %v, want 0.43 measured, 12300 MiB", g0.Use, g0.MeasuredMilli, g0.SimulatedMilli)
	}
	if g1.SimulatedMilli == nil || *g1.SimulatedMilli != 250 || g1.MeasuredMilli != nil {
		t.Errorf("GPU-b (simulated) measured %v simulated %v, want 250 simulated and nothing measured", g1.MeasuredMilli, g1.SimulatedMilli)
	}
	if c := gpus["GPU-c"]; c.Use == nil || c.Use.Source != gpuuse.None || c.Use.Reason != "not metered: no pod holds it" {
		t.Errorf("GPU-c use %+v, want the agent's reason", c.Use)
	}
	if l := gpus["n2/gpu0"]; l.Use == nil || l.Use.Source != gpuuse.None || !strings.Contains(l.Use.Reason, "no GPUUse n2") || l.MeasuredMilli != nil {
		t.Errorf("n2's GPU use %+v, want not metered: no GPUUse n2", l.Use)
	}
	byPod := map[string]webui.Share{}
	for _, sh := range append(g0.Shares, g1.Shares...) {
		byPod[sh.Workload] = sh
	}
	if a := byPod["ns/a"]; a.Use == nil || a.Use.Source != gpuuse.Measured || *a.Use.BusyMilli != 420 || a.MemoryUsedMiB == nil || *a.MemoryUsedMiB != 12000 || a.Idle != nil {
		t.Errorf("share ns/a: %+v", a)
	}
	if b := byPod["ns/b"]; b.Use == nil || *b.Use.BusyMilli != 10 || b.Idle == nil || !b.Idle.Since.Equal(at.Add(-11*time.Minute)) {
		t.Errorf("share ns/b: %+v, want idle since %v", b, at.Add(-11*time.Minute))
	}
	if m := byPod["ns/m"]; m.Use == nil || m.Use.Source != gpuuse.Simulated || *m.Use.BusyMilli != 250 {
		t.Errorf("share ns/m: %+v, want 0.25 simulated", m)
	}
	idle := map[string]*gpuuse.Idle{}
	for _, w := range s.Workloads {
		idle[w.ID] = w.Idle
	}
	if idle["ns/b"] == nil || !idle["ns/b"].Since.Equal(at.Add(-11*time.Minute)) || idle["ns/a"] != nil || idle["ns/m"] != nil {
		t.Errorf("workload idle marks %v, want ns/b only", idle)
	}
	queues := map[string]webui.Queue{}
	for _, q := range s.Queues {
		queues[q.Name] = q
	}
	if q := queues["research"]; q.MeasuredMilli == nil || *q.MeasuredMilli != 420 || q.SimulatedMilli == nil || *q.SimulatedMilli != 250 {
		t.Errorf("queue research measured %v simulated %v, want 420 (ns/a) and 250 (ns/m)", q.MeasuredMilli, q.SimulatedMilli)
	}
	if q := queues["default"]; q.MeasuredMilli == nil || *q.MeasuredMilli != 10 || q.SimulatedMilli != nil {
		t.Errorf("queue default measured %v simulated %v, want 10 (ns/b)", q.MeasuredMilli, q.SimulatedMilli)
	}
	if s.Totals.MeasuredMilli == nil || *s.Totals.MeasuredMilli != 430 || s.Totals.SimulatedMilli == nil || *s.Totals.SimulatedMilli != 250 {
		t.Errorf("totals measured %v simulated %v", s.Totals.MeasuredMilli, s.Totals.SimulatedMilli)
	}
	notes := strings.Join(s.Notes, "\n")
	for _, want := range []string{"over 10s windows", "below 0.05 of a GPU for 10m0s", "1 node(s) publish no GPU use", "(n2)", "GPUUse n3", `"guessed"`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}

	// Not idle yet: the page flags nobody.
	for _, w := range Translate(useView(t, published(at, false)), now).Workloads {
		if w.Idle != nil {
			t.Errorf("workload %s flagged idle before its GPUUse says so", w.ID)
		}
	}

	// A pod the GPUUse does not list yet (bound since the agent last
	// published) is not metered and says why; the GPU keeps the agent's sum.
	st := published(at, true)
	st.GPUs[0].Shares = st.GPUs[0].Shares[1:]
	fresh := Translate(useView(t, st), now)
	for _, sh := range fresh.GPUs[0].Shares {
		if sh.Workload == "ns/a" && (sh.Use == nil || sh.Use.Source != gpuuse.None || !strings.Contains(sh.Use.Reason, "does not list this pod")) {
			t.Errorf("unlisted share ns/a: use %+v", sh.Use)
		}
	}

	// Stale: older than clusterinv.StaleUse, nothing is shown as current.
	late := at.Add(clusterinv.StaleUse + time.Second)
	stale := Translate(useView(t, published(at, true)), late)
	for _, g := range stale.GPUs {
		if g.MeasuredMilli != nil || g.SimulatedMilli != nil || g.Use == nil || g.Use.Source != gpuuse.None {
			t.Errorf("stale GPU %s/%d: use %+v measured %v simulated %v", g.Node, g.Index, g.Use, g.MeasuredMilli, g.SimulatedMilli)
		}
		for _, sh := range g.Shares {
			if sh.Idle != nil || sh.Use == nil || sh.Use.Known() || (g.Node == "n1" && !strings.Contains(sh.Use.Reason, "last published use 2m1s ago")) {
				t.Errorf("stale share %s: use %+v idle %v", sh.Workload, sh.Use, sh.Idle)
			}
		}
	}
	for _, w := range stale.Workloads {
		if w.Idle != nil {
			t.Errorf("workload %s flagged idle from a stale GPUUse", w.ID)
		}
	}
	if notes := strings.Join(stale.Notes, "\n"); !strings.Contains(notes, "1 node(s) last published GPU use more than 2m0s ago") {
		t.Errorf("stale notes:\n%s", notes)
	}
}

// TestUseReader: a List that does not return (an informer that cannot
// sync) leaves the view without use and saying why, one List at a time;
// once it returns, the next read has its objects.
func TestUseReader(t *testing.T) {
	release := make(chan struct{})
	calls := make(chan struct{}, 10)
	obj, err := nodeuse.Object("n1", nodeuse.Status{})
	if err != nil {
		t.Fatal(err)
	}
	r := &UseReader{Wait: time.Millisecond, List: func() ([]*unstructured.Unstructured, error) {
		calls <- struct{}{}
		<-release
		return []*unstructured.Unstructured{obj}, nil
	}}
	for range 3 {
		if objs, err := r.Read(); err == nil || !strings.Contains(err.Error(), "gpuuses.tessera.io") || objs != nil {
			t.Errorf("Read while List hangs = %v, %v; want an error naming gpuuses.tessera.io", objs, err)
		}
	}
	close(release)
	r.Wait = time.Hour
	objs, err := r.Read() // joins the hung flight as it ends, or starts one
	if err != nil || len(objs) != 1 || objs[0].GetName() != "n1" {
		t.Errorf("Read = %v, %v; want the object", objs, err)
	}
	if n := len(calls); n > 2 {
		t.Errorf("List ran %d times; the reads while it hung should share one", n)
	}
}
