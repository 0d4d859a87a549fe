package scheduler

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/podstatus"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// cacheWorld is a cluster of node and pod objects that changes at random,
// as the informers would show it to the scheduling cycle.
type cacheWorld struct {
	rng   *rand.Rand
	rv    int
	uid   int
	nodes map[string]*corev1.Node
	pods  map[types.UID]*corev1.Pod // bound or assumed: occupying
	// marked are the nodes changed since the last update, as the
	// informers' event handlers mark them.
	marked map[string]bool
}

// sync brings s's snapshot up to date as a cycle does: the nodes marked
// since the last call (every node one time in four), the pods listed.
func (w *cacheWorld) sync(s *Scheduler, nodes []*corev1.Node, pods []*corev1.Pod) *snapshot {
	all := s.snap == nil || w.rng.IntN(4) == 0
	if s.snap == nil {
		s.snap = newSnapshot(booked.New(), s.cfg.Catalog, s.cfg.Log)
	}
	if all {
		s.takeNodes(s.snap, nodes)
	} else if err := s.syncNodes(s.snap, false, w.marked, func(name string) (*corev1.Node, bool) {
		n, ok := w.nodes[name]
		return n, ok
	}); err != nil {
		panic(err)
	}
	w.marked = map[string]bool{}
	s.takeListed(s.snap, pods)
	return s.snap
}

// buildSnapshot is the snapshot a scheduler builds from nodes and the
// pods already on them (bound, or assumed) at its first cycle.
func buildSnapshot(log *slog.Logger, src nodeinventory.Source, nodes []*corev1.Node, pods []*corev1.Pod) *snapshot {
	s, err := New(Config{Client: fake.NewClientset(), Log: log})
	if err != nil {
		panic(err)
	}
	return s.syncTo(src, nodes, pods, nil)
}

// rebuilt is the snapshot a scheduler that starts now builds.
func rebuilt(s *Scheduler, nodes []*corev1.Node, pods []*corev1.Pod) *snapshot {
	fresh := &Scheduler{cfg: s.cfg}
	return fresh.syncTo(s.cfg.Inventory, nodes, pods, nil)
}

func testScheduler(src nodeinventory.Source) *Scheduler {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &Scheduler{cfg: Config{Catalog: catalogtest.Small(), Name: DefaultName, Log: log, Inventory: src},
		events: podstatus.New(fake.NewClientset(), fake.NewClientset(), DefaultName, log)}
}

func (w *cacheWorld) nextRV() string { w.rv++; return strconv.Itoa(w.rv) }

func (w *cacheWorld) node(name string, gpus int) *corev1.Node {
	n := labelNode(name, strconv.Itoa(gpus), "H200")
	n.UID, n.ResourceVersion = types.UID("node-"+name), w.nextRV()
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("4")
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// pod is a pod bound to node: granted milli of GPU gpu (-1: CPU only).
func (w *cacheWorld) pod(node string, gpu int, milli int64) *corev1.Pod {
	w.uid++
	var a *binding.Assignment
	if gpu >= 0 {
		a = &binding.Assignment{Version: binding.Version, Node: node, Containers: []binding.Container{{Name: "main",
			GPUs: []binding.Share{{UUID: fmt.Sprintf("%s/gpu%d", node, gpu), Index: gpu, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: 4096, MemoryLimitMiB: 4096}}}}}
	}
	p := boundPod(fmt.Sprintf("p%d", w.uid), node, a)
	p.UID, p.ResourceVersion = types.UID(fmt.Sprintf("uid-%d", w.uid)), w.nextRV()
	p.Spec.SchedulerName = DefaultName
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("300m")
	return p
}

func (w *cacheWorld) lists() ([]*corev1.Node, []*corev1.Pod) {
	nodes := make([]*corev1.Node, 0, len(w.nodes))
	for _, n := range w.nodes {
		nodes = append(nodes, n)
	}
	pods := make([]*corev1.Pod, 0, len(w.pods))
	for _, p := range w.pods {
		pods = append(pods, p)
	}
	// Listers return no particular order.
	w.rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	w.rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	return nodes, pods
}

// pick draws an entry of m (reproducibly: in key order).
func pick[K ~string, V any](rng *rand.Rand, m map[K]V) (K, V) {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	k := keys[rng.IntN(len(keys))]
	return k, m[k]
}

// change makes one random change, as the informers would report it. Pods
// are bound where they fit on room (a copy of the last snapshot's
// cluster, taking the pods as they come): over-committed nodes are booked
// in an order that depends on how the pods are listed, by rebuilds as
// well (TestSnapshotCacheSaturated covers them).
func (w *cacheWorld) change(room *placement.Cluster, at map[string]int) string {
	r := w.rng.IntN(100)
	fits := func(name string, pp placement.Pod, d placement.Decision) bool {
		ni, ok := at[name]
		if _, live := w.nodes[name]; !ok || !live {
			return false
		}
		d.Node = ni
		return room.Apply(&pp, d) == nil
	}
	switch {
	case r < 30 || len(w.pods) == 0: // a pod bound elsewhere
		name, n := pick(w.rng, w.nodes)
		gpus, _ := strconv.Atoi(n.Labels[nodeinventory.LabelCount])
		if gpus == 0 || w.rng.IntN(5) == 0 {
			if !fits(name, placement.Pod{CPUMilli: 300}, placement.Decision{}) {
				return "no room on " + name
			}
			p := w.pod(name, -1, 0)
			w.pods[p.UID] = p
			return "cpu pod on " + name
		}
		gpu, milli := w.rng.IntN(gpus), []int64{100, 250, 500}[w.rng.IntN(3)]
		pp := placement.Pod{CPUMilli: 300, GPU: request.GPU{Count: 1, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: 4096, MemoryLimitMiB: 4096}}
		if ni, ok := at[name]; !ok || gpu >= len(room.Nodes[ni].GPUs) || !fits(name, pp, placement.Decision{GPUs: []int{gpu}}) {
			return "no room on " + name
		}
		p := w.pod(name, gpu, milli)
		w.pods[p.UID] = p
		return "gpu pod on " + name
	case r < 55: // a pod finishes or is deleted
		uid, _ := pick(w.rng, w.pods)
		delete(w.pods, uid)
		return "pod gone"
	case r < 75: // a pod's status or deletion changes
		uid, p := pick(w.rng, w.pods)
		q := p.DeepCopy()
		q.ResourceVersion = w.nextRV()
		if w.rng.IntN(3) == 0 {
			now := metav1.Now()
			q.DeletionTimestamp = &now
		} else {
			q.Status.Phase = corev1.PodRunning
		}
		w.pods[uid] = q
		return "pod updated"
	case r < 80: // a pod's resources change in place (resized)
		uid, p := pick(w.rng, w.pods)
		if !fits(p.Spec.NodeName, placement.Pod{CPUMilli: 200}, placement.Decision{}) {
			return "no room to resize"
		}
		q := p.DeepCopy()
		q.ResourceVersion = w.nextRV()
		q.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
		w.pods[uid] = q
		return "pod resized"
	case r < 92: // a node changes but reports the same inventory
		name, n := pick(w.rng, w.nodes)
		m := n.DeepCopy()
		m.ResourceVersion = w.nextRV()
		if w.rng.IntN(3) == 0 {
			if len(m.Spec.Taints) > 0 {
				m.Spec.Taints = nil
			} else {
				m.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}
			}
			w.nodes[name], w.marked[name] = m, true
			return "node taint toggled"
		}
		m.Spec.Unschedulable = !m.Spec.Unschedulable
		w.nodes[name], w.marked[name] = m, true
		return "node cordon toggled"
	case r < 95: // a node reports more GPUs (pods on GPUs gone would no longer fit)
		name, n := pick(w.rng, w.nodes)
		m := n.DeepCopy()
		m.ResourceVersion = w.nextRV()
		gpus, _ := strconv.Atoi(n.Labels[nodeinventory.LabelCount])
		m.Labels[nodeinventory.LabelCount] = strconv.Itoa(gpus + 1)
		w.nodes[name], w.marked[name] = m, true
		return "node inventory changed"
	case r < 97 || len(w.nodes) < 70: // a node comes (sometimes unreadable)
		name := fmt.Sprintf("n%03d", len(w.nodes)+w.rng.IntN(1000))
		n := w.node(name, 1+w.rng.IntN(4))
		if w.rng.IntN(4) == 0 {
			n.Labels[nodeinventory.LabelModel] = "H9000"
		}
		w.nodes[name], w.marked[name] = n, true
		return "node added"
	default: // a node goes, with its pods
		name, _ := pick(w.rng, w.nodes)
		delete(w.nodes, name)
		w.marked[name] = true
		for uid, p := range w.pods {
			if p.Spec.NodeName == name {
				delete(w.pods, uid)
			}
		}
		return "node removed"
	}
}

// placeLikeACycle books pods on snap as a cycle and its commits do (the
// cycle's placement assumed, then the pod's own hold) and returns them
// as assumed pods.
func (w *cacheWorld) placeLikeACycle(s *Scheduler, snap *snapshot, n int) []*corev1.Pod {
	var out []*corev1.Pod
	for range n {
		ni := w.rng.IntN(len(snap.nodes))
		node := &snap.cluster.Nodes[ni]
		if len(node.GPUs) == 0 {
			continue
		}
		pos := w.rng.IntN(len(node.GPUs))
		milli := []int64{100, 250, 500}[w.rng.IntN(3)]
		pp := placement.Pod{GPU: request.GPU{Count: 1, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: 4096, MemoryLimitMiB: 4096}, CPUMilli: 300}
		d := placement.Decision{Node: ni, GPUs: []int{pos}}
		if err := snap.cluster.Apply(&pp, d); err != nil {
			continue // full: a cycle would not place it there
		}
		g := node.GPUs[pos]
		p := w.pod(snap.nodes[ni].Name, g.Index, milli)
		id := p.Namespace + "/" + p.Name
		pp.Name = id + "/main"
		snap.books.Assume(id, cycle.Running{Parts: []placement.Pod{pp}, Decisions: []placement.Decision{d}})
		s.bookPod(snap, p)
		out = append(out, p)
	}
	return out
}

// TestSnapshotSyncMatchesRebuild runs random sequences of node and pod
// changes, and of cycles that place pods, and checks after each update
// that the kept snapshot is the one a new scheduler makes from the same
// nodes and pods: nodes, inventories, the engine's cluster, the bookings,
// and the decisions of policies that keep their class index across
// cycles (the cached snapshot's) and of policies that see a new cluster
// each time (the rebuilt one) for a set of probe pods.
func TestSnapshotSyncMatchesRebuild(t *testing.T) {
	src := nodeinventory.NewCache(nodeinventory.Labels{Catalog: catalogtest.Small()})
	probes := []placement.Pod{
		{Name: "quarter", GPU: request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 1024, MemoryLimitMiB: 1024}, CPUMilli: 100},
		{Name: "half", GPU: request.GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500, MemoryMiB: 1024, MemoryLimitMiB: 1024}, CPUMilli: 100},
		{Name: "whole", GPU: request.GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000}, CPUMilli: 100},
		{Name: "two", GPU: request.GPU{Count: 2, ComputeMilli: 1000, ComputeLimitMilli: 1000}, CPUMilli: 100},
		{Name: "cpu", CPUMilli: 2000},
	}
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			w := &cacheWorld{rng: rand.New(rand.NewPCG(seed, 7)), nodes: map[string]*corev1.Node{}, pods: map[types.UID]*corev1.Pod{}, marked: map[string]bool{}}
			for i := range 80 { // over classMinNodes: the policies score by class
				name := fmt.Sprintf("n%03d", i)
				w.nodes[name] = w.node(name, 1+i%4)
			}
			policies := map[string][2]placement.Policy{}
			for _, name := range []string{placement.DefaultPolicy, "gpuclustering", "bestfit"} {
				a, err := placement.New(name, placement.Options{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := placement.New(name, placement.Options{Seed: seed})
				policies[name] = [2]placement.Policy{a, b}
			}
			s := testScheduler(src)
			var history []string
			var last *snapshot // the cached snapshot after the last cycle
			for step := range 300 {
				changes := 1 + w.rng.IntN(4)
				if step == 0 {
					changes = 0
				}
				var room *placement.Cluster
				var at map[string]int
				if last != nil {
					room, at = last.cluster.Clone(), map[string]int{}
					for i, n := range last.nodes {
						at[n.Name] = i
					}
				}
				for range changes {
					history = append(history, w.change(room, at))
				}
				nodes, pods := w.lists()
				got := w.sync(s, nodes, pods)
				want := rebuilt(s, nodes, pods)
				where := fmt.Sprintf("step %d (last changes %q)", step, history[max(0, len(history)-changes):])
				compareSnapshots(t, where, got, want)
				for name, pols := range policies {
					for _, p := range probes {
						dGot, errGot := pols[0].Place(got.cluster, &p)
						dWant, errWant := pols[1].Place(want.cluster, &p)
						if (errGot == nil) != (errWant == nil) || !reflect.DeepEqual(dGot, dWant) {
							t.Fatalf("%s: %s places %s at %+v (%v) on the cached snapshot, %+v (%v) on a rebuilt one", where, name, p.Name, dGot, errGot, dWant, errWant)
						}
					}
				}
				if t.Failed() {
					t.FailNow()
				}
				// The cycle places a few pods (assumed until the informer
				// shows them bound) and at times fails part way.
				for _, p := range w.placeLikeACycle(s, got, w.rng.IntN(3)) {
					w.pods[p.UID] = p
				}
				last = got
				if w.rng.IntN(50) == 0 {
					s.snap = nil // a cycle failed: built anew
				}
			}
		})
	}
}

// compareSnapshots fails t when got and want differ in anything a cycle
// reads.
func compareSnapshots(t *testing.T, where string, got, want *snapshot) {
	t.Helper()
	if !slices.Equal(got.nodes, want.nodes) {
		t.Errorf("%s: nodes differ: %d and %d", where, len(got.nodes), len(want.nodes))
		return
	}
	invs := func(s *snapshot) []inventory.Node {
		var out []inventory.Node
		for i := range s.nodes {
			out = append(out, *s.inv(i))
		}
		return out
	}
	for _, f := range []struct {
		what      string
		got, want any
	}{
		{"inventories", invs(got), invs(want)}, {"sharing", got.sharing, want.sharing}, {"sharing values", got.sharings, want.sharings},
		{"tainted nodes", got.tainted, want.tainted}, {"capacity", got.capacity, want.capacity}, {"usage", got.books.Usage(), want.books.Usage()},
		{"running", byID(got.books.Running()), byID(want.books.Running())},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s: %s differ:\n got %v\nwant %v", where, f.what, f.got, f.want)
		}
	}
	for ni := range want.cluster.Nodes {
		if !reflect.DeepEqual(normalNode(got.cluster.Nodes[ni]), normalNode(want.cluster.Nodes[ni])) {
			t.Errorf("%s: node %s differs:\n got %+v\nwant %+v", where, want.nodes[ni].Name, got.cluster.Nodes[ni], want.cluster.Nodes[ni])
		}
		g, w := slices.Sorted(slices.Values(got.books.OnNode(ni))), slices.Sorted(slices.Values(want.books.OnNode(ni)))
		if !slices.Equal(g, w) {
			t.Errorf("%s: bookings on %s differ:\n got %v\nwant %v", where, want.nodes[ni].Name, g, w)
		}
	}
}

// byID is running by workload ID (the order of booking differs between a
// kept snapshot and a new one).
func byID(run []cycle.Running) map[string]cycle.Running {
	m := map[string]cycle.Running{}
	for _, r := range run {
		m[r.ID] = r
	}
	return m
}

// normalNode is n with no shapes as nil: a node whose last pod was
// released keeps an empty map, one never booked has none (the engine
// reads both alike).
func normalNode(n placement.Node) placement.Node {
	if len(n.Shapes) == 0 {
		n.Shapes = nil
	}
	return n
}

// BenchmarkSnapshot compares a cycle's snapshot built from scratch
// (as every cycle once did) with one brought up to date (syncNodes,
// syncPods) at 5,000 nodes of 8 GPUs with 2,000 pods bound,
// when between two cycles one pod is bound and one finishes and no node
// changes.
func BenchmarkSnapshot(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := nodeinventory.NewCache(nodeinventory.Labels{Catalog: catalogtest.Small()})
	w := &cacheWorld{rng: rand.New(rand.NewPCG(1, 2)), nodes: map[string]*corev1.Node{}, pods: map[types.UID]*corev1.Pod{}}
	for i := range 5000 {
		name := fmt.Sprintf("n%04d", i)
		w.nodes[name] = w.node(name, 8)
	}
	names := make([]string, 0, len(w.nodes))
	for name := range w.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	var order []types.UID
	bind := func() {
		p := w.pod(names[w.rng.IntN(len(names))], w.rng.IntN(8), 250)
		w.pods[p.UID] = p
		order = append(order, p.UID)
	}
	for range 2000 {
		bind()
	}
	nodes, _ := w.lists()
	step := func() []*corev1.Pod { // one pod bound, the oldest gone
		bind()
		delete(w.pods, order[0])
		order = order[1:]
		pods := make([]*corev1.Pod, 0, len(w.pods))
		for _, uid := range order {
			pods = append(pods, w.pods[uid])
		}
		return pods
	}
	buildSnapshot(log, src, nodes, step()) // the inventories read once, as in the scheduler
	b.Run("rebuild", func(b *testing.B) {
		for b.Loop() {
			buildSnapshot(log, src, nodes, step())
		}
	})
	b.Run("update", func(b *testing.B) {
		s := testScheduler(src)
		s.syncTo(src, nodes, step(), nil)
		for b.Loop() {
			_ = s.syncNodes(s.snap, false, nil, nil)
			s.takeListed(s.snap, step())
		}
	})
}

// TestSnapshotSyncSaturated: on an over-committed node a pod that no
// longer fits is booked saturating, and whatever changes there, the node
// books as a new scheduler would book it.
func TestSnapshotSyncSaturated(t *testing.T) {
	src := nodeinventory.NewCache(nodeinventory.Labels{Catalog: catalogtest.Small()})
	w := &cacheWorld{rng: rand.New(rand.NewPCG(1, 1))}
	nodes := []*corev1.Node{w.node("a", 1), w.node("b", 1)}
	p1, p2, p3, p4 := w.pod("a", 0, 600), w.pod("a", 0, 600), w.pod("a", 0, 600), w.pod("b", 0, 500)
	gpuFree := func(s *snapshot, node string) int64 {
		ni, _ := s.books.Index(node)
		return s.cluster.Nodes[ni].GPUs[0].FreeMilli
	}
	s := testScheduler(src)
	for _, step := range []struct {
		what  string
		pods  []*corev1.Pod
		freeA int64
	}{
		{"p2 over-commits a", []*corev1.Pod{p1, p2}, 0},
		{"nothing changed", []*corev1.Pod{p1, p2}, 0},
		{"a pod on the other node", []*corev1.Pod{p1, p2, p4}, 0},
		{"p1 gone from the over-committed node", []*corev1.Pod{p2, p4}, 400},
		{"p3 over-commits a again", []*corev1.Pod{p2, p4, p3}, 0},
		{"p4 gone from the other node", []*corev1.Pod{p2, p3}, 0},
		{"p3 gone", []*corev1.Pod{p2}, 400},
	} {
		got := s.syncTo(src, nodes, step.pods, nil)
		compareSnapshots(t, step.what, got, rebuilt(s, nodes, step.pods))
		if gpuFree(got, "a") != step.freeA {
			t.Errorf("%s: a's GPU %d free; want %d", step.what, gpuFree(got, "a"), step.freeA)
		}
	}
}

// TestSnapshotSyncListedTwice: a pod listed twice is booked once.
func TestSnapshotSyncListedTwice(t *testing.T) {
	src := nodeinventory.NewCache(nodeinventory.Labels{Catalog: catalogtest.Small()})
	w := &cacheWorld{rng: rand.New(rand.NewPCG(1, 1))}
	nodes := []*corev1.Node{w.node("a", 1)}
	p := w.pod("a", 0, 300)
	s := testScheduler(src)
	for i, pods := range [][]*corev1.Pod{{p, p}, {p}, {p, p}, {p}} {
		got := s.syncTo(src, nodes, pods, nil)
		if free := got.cluster.Nodes[0].GPUs[0].FreeMilli; free != 700 {
			t.Errorf("update %d: %d free, want 700 (p booked once)", i, free)
		}
	}
}

// TestBookedQueueFollowsItsPodGroup: a bound pod whose queue is its
// Volcano PodGroup's is charged to the group's queue as it is now, read
// again each cycle though the pod itself did not change.
func TestBookedQueueFollowsItsPodGroup(t *testing.T) {
	src := nodeinventory.NewCache(nodeinventory.Labels{Catalog: catalogtest.Small()})
	w := &cacheWorld{rng: rand.New(rand.NewPCG(1, 1))}
	p := w.pod("a", 0, 500)
	p.Annotations[workload.VolcanoAnnotationGroupName] = "pg"
	queue := "research"
	s := testScheduler(src)
	s.members.VolcanoGroup = func(string, string) (podgroups.VolcanoGroup, bool, error) {
		return podgroups.VolcanoGroup{Queue: queue}, true, nil
	}
	snap := s.syncTo(src, []*corev1.Node{w.node("a", 1)}, []*corev1.Pod{p}, nil)
	if got := snap.books.Usage()["research"].GPUMilli; got != 500 {
		t.Fatalf("queue research charged %d milli, want 500", got)
	}
	queue = "batch" // the PodGroup moved to another queue
	s.relabelVolatile(snap)
	if u := snap.books.Usage(); u["batch"].GPUMilli != 500 || u["research"].GPUMilli != 0 {
		t.Fatalf("after the PodGroup moved: usage %v, want 500 milli on batch and none on research", u)
	}
}
