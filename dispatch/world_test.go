package dispatch

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// world is a front door in miniature: a virtual clock, a small cluster,
// the workloads' translations, the running work and the binds issued
// (assumed, then bound: booked in every frame until a bind fails).
type world struct {
	t       *testing.T
	core    *Core
	policy  placement.Policy
	now     time.Time
	seq     uint64
	nodes   []placement.Node
	ws      map[string]cycle.Workload
	errs    map[string]error
	gangs   map[string]GangSpec
	noGangs bool // Frame.Gang is nil
	queues  *queueing.Tree
	running []cycle.Running
	held    map[string]Bind
	// last is the cluster of the last frame, as the cycle left it.
	last *placement.Cluster
}

func newWorld(t *testing.T, cfg Config, nodes ...placement.Node) *world {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := placement.New("bestfit", placement.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, core: c, policy: pol, now: t0, nodes: nodes, ws: map[string]cycle.Workload{},
		errs: map[string]error{}, gangs: map[string]GangSpec{}, held: map[string]Bind{}}
}

// gpuNode is a node with n whole A100-80GB GPUs and plenty of CPU and memory.
func gpuNode(name string, n int) placement.Node {
	return placement.NewNode(name, 64000, 512*1024, n, "A100-80GB", 81920)
}

// wholeGPUs is a workload asking n whole GPUs. Its translation names no
// queue, gang or priority: the core takes those from the Item.
func wholeGPUs(id string, n int) cycle.Workload {
	return cycle.Workload{ID: id, Parts: []placement.Pod{{Name: id, CPUMilli: 1000, GPU: request.GPU{Count: n, ComputeMilli: request.Whole}}}}
}

// item is an Item arriving now, with the next sequence number.
func (w *world) item(id string, mod ...func(*Item)) Item {
	it := Item{ID: id, Arrived: w.now, Seq: w.seq}
	w.seq++
	for _, m := range mod {
		m(&it)
	}
	return it
}

// arrive adds a workload asking n whole GPUs, arriving now.
func (w *world) arrive(id string, n int, mod ...func(*Item)) Item {
	it := w.item(id, mod...)
	w.ws[id] = wholeGPUs(id, n)
	w.core.Add(it)
	return it
}

func prio(p int32) func(*Item)      { return func(it *Item) { it.Priority = p } }
func gang(k string) func(*Item)     { return func(it *Item) { it.Gang = k } }
func queue(q string) func(*Item)    { return func(it *Item) { it.Queue = q } }
func since(t time.Time) func(*Item) { return func(it *Item) { it.Since = t } }

// run books a running one-part workload of n whole GPUs on node at GPUs gpus.
func (w *world) run(id string, p int32, node int, gpus []int, started time.Time) {
	wl := wholeGPUs(id, len(gpus))
	w.running = append(w.running, cycle.Running{ID: id, Priority: p, Started: started, Parts: wl.Parts,
		Decisions: []placement.Decision{{Node: node, GPUs: gpus}}})
}

// stop ends a running workload.
func (w *world) stop(id string) {
	w.running = slices.DeleteFunc(w.running, func(r cycle.Running) bool { return r.ID == id })
}

func (w *world) advance(d time.Duration) { w.now = w.now.Add(d) }

// frame is the world now: the nodes with the running work and the binds
// issued booked.
func (w *world) frame() Frame {
	w.t.Helper()
	c := (&placement.Cluster{Nodes: w.nodes}).Clone()
	for _, r := range w.running {
		for i := range r.Parts {
			if err := c.Apply(&r.Parts[i], r.Decisions[i]); err != nil {
				w.t.Fatalf("book running %s: %v", r.ID, err)
			}
		}
	}
	ids := make([]string, 0, len(w.held))
	for id := range w.held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		b := w.held[id]
		for i := range b.Workload.Parts {
			if err := c.Apply(&b.Workload.Parts[i], b.Decisions[i]); err != nil {
				w.t.Fatalf("book bind %s: %v", id, err)
			}
		}
	}
	f := Frame{Cluster: c, Policy: w.policy, Queues: w.queues, Running: slices.Clone(w.running),
		Translate: func(id string) (cycle.Workload, error) {
			if err := w.errs[id]; err != nil {
				return cycle.Workload{}, err
			}
			wl, ok := w.ws[id]
			if !ok {
				w.t.Fatalf("translate %s: unknown workload", id)
			}
			return wl, nil
		}}
	if !w.noGangs {
		f.Gang = func(k string) GangSpec {
			if s, ok := w.gangs[k]; ok {
				return s
			}
			return GangSpec{Min: 1}
		}
	}
	return f
}

// cycle runs one cycle now and records the binds issued.
func (w *world) cycle() Ready {
	w.t.Helper()
	f := w.frame()
	rd, err := w.core.Cycle(w.now, f)
	if err != nil {
		w.t.Fatalf("cycle at %v: %v", w.now.Sub(t0), err)
	}
	for _, b := range rd.Binds {
		w.held[b.ID] = b
	}
	w.last = f.Cluster
	return rd
}

// bindFailed reports a bind that could not be carried out.
func (w *world) bindFailed(id string) time.Time {
	delete(w.held, id)
	return w.core.BindFailed(id, w.now)
}

func binds(rd Ready) []string {
	var ids []string
	for _, b := range rd.Binds {
		ids = append(ids, b.ID)
	}
	return ids
}

// waitOf is id's Wait in rd; it fails the test when there is none.
func waitOf(t *testing.T, rd Ready, id string) Wait {
	t.Helper()
	for _, w := range rd.Waits {
		if w.ID == id {
			return w
		}
	}
	t.Fatalf("no wait for %s in %+v", id, rd)
	return Wait{}
}

func hasWait(rd Ready, id string) bool {
	return slices.ContainsFunc(rd.Waits, func(w Wait) bool { return w.ID == id })
}

// evictions lists each eviction as "for:victim,victim".
func evictions(rd Ready) []string {
	var out []string
	for _, e := range rd.Evictions {
		ids := make([]string, len(e.Victims))
		for i, v := range e.Victims {
			ids[i] = v.ID
		}
		out = append(out, e.For+":"+strings.Join(ids, ","))
	}
	return out
}

// freeGPUs is each node's free GPU compute in the cluster.
func freeGPUs(c *placement.Cluster) []int64 {
	out := make([]int64, len(c.Nodes))
	for i, n := range c.Nodes {
		for _, g := range n.GPUs {
			out[i] += g.FreeMilli
		}
	}
	return out
}

// booksCore is a core whose books hold one node "n0" of gpus H200s, and a
// frame on those books that places each workload on one whole GPU.
func booksCore(t *testing.T, gpus int) (*Core, Frame) {
	t.Helper()
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := inventory.Node{Name: "n0", CPUMilli: 64000, MemoryMiB: 512 << 10}
	for i := range gpus {
		n.GPUs = append(n.GPUs, inventory.GPU{UUID: fmt.Sprintf("gpu-%d", i), Index: i, Model: "H200", MemoryMiB: 143771, Health: inventory.Healthy, NUMANode: -1})
	}
	if err := c.Books().SetNode(n, ""); err != nil {
		t.Fatal(err)
	}
	pol, err := placement.New("bestfit", placement.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c, Frame{Policy: pol, Translate: func(id string) (cycle.Workload, error) { return wholeGPUs(id, 1), nil }}
}
