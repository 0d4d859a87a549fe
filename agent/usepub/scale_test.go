package usepub_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	agentkube "github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/usepub"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// simNode is a simulated agent's node: 8 GPUs, one pod on each with a
// declared load (simulated.Load), whose use windows a gpuuse.Tracker folds
// from one-second readings as the node arbiter does on simulated GPUs.
type simNode struct {
	inv      inventory.Node
	allocs   []checkpoint.Entry
	loads    map[string]simulated.Load
	started  time.Time
	fed      time.Time
	trackers map[string]*gpuuse.Tracker
	steady   bool // no pod's use moves: only the period publishes
}

const (
	scaleWindow = 10 * time.Second
	scaleGPUs   = 8
)

var scaleRule = gpuuse.IdleRule{BelowMilli: 50, After: time.Minute}

// The loads the nodes' pods declare: steady ones, and one whose busy
// fraction swings by 0.9 twice a minute.
var (
	steadyLoads = []string{"busy=0.6,memory=20Gi", "busy=0.01,memory=2Gi", "", "busy=0.3,on=5s,off=5s,memory=8Gi"}
	swingLoad   = "busy=0.9,on=20s,off=40s,memory=30Gi"
)

func newSimNode(t *testing.T, i int, started time.Time) *simNode {
	n := &simNode{inv: inventory.Node{Name: fmt.Sprintf("gpu-node-%04d", i), Source: "sim"}, loads: map[string]simulated.Load{},
		started: started, fed: started, trackers: map[string]*gpuuse.Tracker{}, steady: i%2 == 0}
	for g := range scaleGPUs {
		uuid := fmt.Sprintf("GPU-%04d-%d", i, g)
		n.inv.GPUs = append(n.inv.GPUs, inventory.GPU{UUID: uuid, Index: g, Model: "H100-SXM", MemoryMiB: 81559})
		spec := steadyLoads[(i+g)%len(steadyLoads)]
		if !n.steady && g == 0 {
			spec = swingLoad
		}
		l, err := simulated.ParseLoad(spec)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s-pod%d-main", n.inv.Name, g)
		n.loads[key] = l
		n.trackers[key] = &gpuuse.Tracker{}
		n.allocs = append(n.allocs, checkpoint.Entry{Key: key, Namespace: "ml", Pod: fmt.Sprintf("job-%d", g), Container: "main",
			GPUs: []binding.Share{{UUID: uuid, Index: g, ComputeMilli: 500, ComputeLimitMilli: 1000, MemoryMiB: 32768, MemoryLimitMiB: 40960}}})
	}
	return n
}

// records feeds the trackers up to now in one-second readings and builds
// the node's records as the agent does.
func (n *simNode) records(now time.Time) nodeuse.Status {
	for ; n.fed.Before(now); n.fed = n.fed.Add(time.Second) {
		end := n.fed.Add(time.Second)
		for key, tr := range n.trackers {
			tr.Add(end, time.Second, n.loads[key].Busy(n.started, n.fed, end), scaleWindow, gpuuse.Simulated, scaleRule)
		}
	}
	var seats []arbiter.SeatStatus
	mem := map[string]int64{}
	for _, e := range n.allocs {
		tr := n.trackers[e.Key]
		seats = append(seats, arbiter.SeatStatus{Key: e.Key, GPU: e.GPUs[0].UUID, Use: tr.Last(), Idle: tr.Idle(scaleRule)})
		mem[e.Key] = n.loads[e.Key].MemoryMiB
	}
	return usepub.Records(usepub.Node{Inventory: n.inv, Allocations: n.allocs, Seats: seats, Window: scaleWindow, Rule: scaleRule,
		Metered: true, SimMemoryMiB: mem}, now)
}

// writeCounter counts the write requests (every method but GET) on
// GPUUse objects, the API writes use costs.
type writeCounter struct {
	next   http.RoundTripper
	writes *atomic.Int64
}

func (c writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	gvr := nodeuse.Resource()
	if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/"+gvr.Group+"/"+gvr.Version+"/"+gvr.Resource) {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestThousandAgentsWriteRate runs 1,000 simulated agents' use publishers
// (usepub.Loop with agent/kube's UsePublisher) against a real API server
// for a simulated minute on an injected clock, one step a second, and
// counts the API writes their use costs. It asserts behaviour only: one
// write per publication (the first creates the object after its patch is
// refused), each node at most one publication per period besides its
// first and large changes never closer than the gap, a node whose use does
// not move only on the period, and the objects read back as published,
// labelled simulated.
func TestThousandAgentsWriteRate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and 1,000 publishers")
	}
	const nodes = 1000
	const seconds = 60
	// No KWOK: the Nodes here only own their GPUUse objects; kubelets'
	// heartbeats are not use writes.
	ctx, _, cfg := testcluster.ForTest(t, false)
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // the publishers share one client; each agent has its own
	counter := writeCounter{writes: &atomic.Int64{}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return writeCounter{next: rt, writes: counter.writes} }
	core := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := nodeuse.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	sims := make([]*simNode, nodes)
	loops := make([]*usepub.Loop, nodes)
	for i := range nodes {
		sims[i] = newSimNode(t, i, t0.Add(-3*time.Minute-time.Duration(i%60)*time.Second))
		loops[i] = &usepub.Loop{Records: sims[i].records, Sink: &agentkube.UsePublisher{Core: core, Dynamic: dyn, Node: sims[i].inv.Name}}
	}
	parallel(t, nodes, func(i int) error {
		_, err := core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: sims[i].inv.Name}}, metav1.CreateOptions{})
		return err
	})

	whys := make([]map[gpuuse.Why][]time.Time, nodes)
	for i := range whys {
		whys[i] = map[gpuuse.Why][]time.Time{}
	}
	last := make([]nodeuse.Status, nodes)
	perSecond := make([]int64, seconds)
	for s := range seconds {
		now := t0.Add(time.Duration(s) * time.Second)
		before := counter.writes.Load()
		parallel(t, nodes, func(i int) error {
			why, err := loops[i].Step(ctx, now)
			if why != "" && err == nil {
				whys[i][why] = append(whys[i][why], now)
				last[i] = sims[i].records(now)
			}
			return err
		})
		perSecond[s] = counter.writes.Load() - before
	}

	// Behaviour.
	var pubs, first, period, change int64
	for i, w := range whys {
		if len(w[gpuuse.WhyRetry]) > 0 {
			t.Errorf("node %d retried %d times: a publication failed", i, len(w[gpuuse.WhyRetry]))
		}
		if len(w[gpuuse.WhyFirst]) != 1 {
			t.Errorf("node %d published first %d times, want 1", i, len(w[gpuuse.WhyFirst]))
		}
		if n, most := len(w[gpuuse.WhyPeriod]), seconds/int(gpuuse.DefaultPublishPeriod/time.Second); n > most {
			t.Errorf("node %d published %d times on the period in %d s, want at most %d", i, n, seconds, most)
		}
		all := append(append(append([]time.Time(nil), w[gpuuse.WhyFirst]...), w[gpuuse.WhyPeriod]...), w[gpuuse.WhyChange]...)
		for _, c := range w[gpuuse.WhyChange] {
			for _, o := range all {
				if o.Before(c) && c.Sub(o) < gpuuse.DefaultPublishGap {
					t.Errorf("node %d published a change at %v, %v after its publication at %v (gap %v)", i, c.Sub(t0), c.Sub(o), o.Sub(t0), gpuuse.DefaultPublishGap)
				}
			}
		}
		if sims[i].steady && len(w[gpuuse.WhyChange]) != 0 {
			t.Errorf("node %d: no pod's use moves, yet it published %d changes at %v", i, len(w[gpuuse.WhyChange]), w[gpuuse.WhyChange])
		}
		first += int64(len(w[gpuuse.WhyFirst]))
		period += int64(len(w[gpuuse.WhyPeriod]))
		change += int64(len(w[gpuuse.WhyChange]))
	}
	pubs = first + period + change
	if change == 0 {
		t.Errorf("no node published a large change; the swinging pods' use moves by 0.9 twice a minute")
	}
	// One write per publication; a node's first patch is refused (no
	// object yet) before its create.
	if got, want := counter.writes.Load(), pubs+nodes; got != want {
		t.Errorf("API writes on GPUUse objects = %d, want %d (one per publication, %d, and one refused patch per node)", got, want, pubs)
	}
	// Read back: every object as last published, simulated figures
	// labelled simulated.
	list, err := dyn.Resource(nodeuse.Resource()).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != nodes {
		t.Fatalf("%d GPUUse objects, want %d", len(list.Items), nodes)
	}
	idle := 0
	for i := range list.Items {
		u := &list.Items[i]
		st, err := nodeuse.FromObject(u)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if _, err := fmt.Sscanf(u.GetName(), "gpu-node-%d", &n); err != nil {
			t.Fatal(err)
		}
		want := last[n]
		if !st.At.Equal(want.At) || len(st.GPUs) != scaleGPUs {
			t.Errorf("%s: published at %v with %d GPUs, want %v and %d", u.GetName(), st.At, len(st.GPUs), want.At, scaleGPUs)
			continue
		}
		for g, gpu := range st.GPUs {
			s := gpu.Shares[0]
			w := want.GPUs[g].Shares[0]
			if s.Use.Source != gpuuse.Simulated || !sameMilli(s.Use.BusyMilli, w.Use.BusyMilli) || (s.Idle == nil) != (w.Idle == nil) {
				t.Errorf("%s GPU %d: use %+v idle %v, want simulated %+v idle %v", u.GetName(), g, s.Use, s.Idle, w.Use, w.Idle)
			}
			if s.Idle != nil {
				idle++
			}
		}
		if len(u.GetOwnerReferences()) != 1 || u.GetOwnerReferences()[0].Name != u.GetName() {
			t.Errorf("%s: owners %v, want its Node", u.GetName(), u.GetOwnerReferences())
		}
	}
	if idle == 0 {
		t.Errorf("no idle holder published; the pods that run nothing stay idle for minutes")
	}

	// The figures.
	steadyWrites := counter.writes.Load() - perSecond[0]
	t.Logf("%d simulated agents, %d simulated seconds (period %v, gap %v, busy step %.1f GPU): %d API writes on GPUUse objects (%d first publications with as many refused patches, %d on the period, %d large changes); %.1f writes/s over the minute, %.1f writes/s after the first second; %d idle holders marked",
		nodes, seconds, gpuuse.DefaultPublishPeriod, gpuuse.DefaultPublishGap, float64(gpuuse.DefaultBusyStepMilli)/1000,
		counter.writes.Load(), first, period, change, float64(counter.writes.Load())/seconds, float64(steadyWrites)/(seconds-1), idle)
	t.Logf("| agents | simulated s | writes | writes/s | writes/s after the first second | per agent per minute (after the first) |")
	t.Logf("| %d | %d | %d | %.1f | %.1f | %.2f |", nodes, seconds, counter.writes.Load(), float64(counter.writes.Load())/seconds,
		float64(steadyWrites)/(seconds-1), float64(steadyWrites)/nodes)
}

func sameMilli(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// parallel runs f for 0..n-1 on 32 workers and fails t on the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := atomic.Int64{}
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					once.Do(func() { first = fmt.Errorf("item %d: %w", i, err) })
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}
