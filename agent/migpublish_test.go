package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl"
)

// recorder is a Publisher that keeps every published node; while gated, a
// Publish waits (an API server that does not answer).
type recorder struct {
	mu      sync.Mutex
	nodes   []inventory.Node
	changed chan struct{} // closed and replaced at every Publish start and end
	entered int
	gate    chan struct{} // nil: open
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) Publish(ctx context.Context, node inventory.Node) error {
	r.mu.Lock()
	r.entered++
	gate := r.gate
	r.notifyLocked()
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = append(r.nodes, node)
	r.notifyLocked()
	return nil
}

// wait waits until cond holds on the recorder's state (failing the test
// after a minute: a hang, not a timing claim).
func (r *recorder) wait(t *testing.T, what string, cond func(entered int, published []inventory.Node) bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		ok, ch := cond(r.entered, r.nodes), r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waiting for %s: %d publishes, last %s", what, len(r.published()), r.last())
		}
	}
}

func (r *recorder) published() []inventory.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]inventory.Node(nil), r.nodes...)
}

func (r *recorder) last() string {
	p := r.published()
	if len(p) == 0 {
		return "none"
	}
	return layoutOf(p[len(p)-1])
}

// layoutOf describes each GPU's published instances: "gpu:profile@start*"
// (* in use), GPUs separated by "|".
func layoutOf(n inventory.Node) string {
	var gpus []string
	for _, g := range n.GPUs {
		var ins []string
		for _, in := range g.MIGInstances {
			s := fmt.Sprintf("%s@%d", in.Profile, *in.Start)
			if in.InUse {
				s += "*"
			}
			ins = append(ins, s)
		}
		gpus = append(gpus, strings.Join(ins, " "))
	}
	return strings.Join(gpus, "|")
}

func lastIs(want string) func(int, []inventory.Node) bool {
	return func(_ int, p []inventory.Node) bool { return len(p) > 0 && layoutOf(p[len(p)-1]) == want }
}

// The published inventory follows the MIG layout: after a MIG pod's
// Allocate the node's GPUNode lists the instance created for it, with its
// UUID, as in use; after the pod ends it is gone (destroyed). An instance
// the operator made and a container holds is published in use too, and
// free again once its pod ends.
func TestMIGLayoutPublished(t *testing.T) {
	m := newMIGNode(t, 1)
	op, err := migctl.Create(m.gpus[0], m.spec, "1g.10gb", 6) // the operator's
	if err != nil {
		t.Fatal(err)
	}
	m.node = m.discovered()
	pub := m.startPublishing(newRecorder())
	pub.wait(t, "the first publish", lastIs("1g.10gb@6"))
	ctx := context.Background()
	if _, err := m.kubelet.Admit(ctx, m.bind("ns", "mig", oneGPU, map[string][]binding.Share{"main": {m.createShare(0, "3g.40gb", 0)}}), kubeletsim.AdmitOptions{}); err != nil {
		t.Fatalf("admit: %v", err)
	}
	pub.wait(t, "the created instance in use", lastIs("3g.40gb@0* 1g.10gb@6"))
	created := m.agent.Allocations()[0].GPUs[0].UUID
	got := pub.published()
	if ins := got[len(got)-1].GPUs[0].MIGInstances; ins[0].UUID != created || ins[0].MemoryMiB <= 0 || ins[1].UUID != op.UUID {
		t.Errorf("published instances %+v, want the created %s (with its profile's memory) and the operator's %s", ins, created, op.UUID)
	}
	static := binding.Share{UUID: op.UUID, Index: 0, ComputeMilli: 142, ComputeLimitMilli: 142, MemoryMiB: 9984, MemoryLimitMiB: 9984,
		MIGProfile: "1g.10gb", MIG: &binding.MIGInstance{GPU: m.gpus[0].UUID(), Start: 6}}
	if _, err := m.kubelet.Admit(ctx, m.bind("ns", "static", oneGPU, map[string][]binding.Share{"main": {static}}), kubeletsim.AdmitOptions{}); err != nil {
		t.Fatalf("admit on the operator's instance: %v", err)
	}
	pub.wait(t, "the operator's instance in use", lastIs("3g.40gb@0* 1g.10gb@6*"))
	m.end("ns", "mig")
	pub.wait(t, "the created instance gone", lastIs("1g.10gb@6*"))
	m.end("ns", "static")
	pub.wait(t, "the operator's instance free", lastIs("1g.10gb@6"))
	if l := m.gpus[0].Layout(); l != "1g.10gb@6" {
		t.Errorf("driver layout %q, want the operator's instance only", l)
	}
}

// Publishing never holds up Allocate: with the API server not answering,
// a two-GPU container gets both its instances created and a second pod its
// own; once the API server answers, all three are published by one
// publish after the pending one, not one per instance.
func TestMIGLayoutPublishCoalesces(t *testing.T) {
	m := newMIGNode(t, 2)
	gated := newRecorder()
	gated.gate = make(chan struct{})
	pub := m.startPublishing(gated)
	pub.wait(t, "the first publish to start", func(entered int, _ []inventory.Node) bool { return entered == 1 })
	ctx := context.Background()
	two := []kubeletsim.Container{{Name: "main", Devices: 2}}
	if _, err := m.kubelet.Admit(ctx, m.bind("ns", "two", two, map[string][]binding.Share{"main": {m.createShare(0, "3g.40gb", 4), m.createShare(1, "3g.40gb", 4)}}), kubeletsim.AdmitOptions{}); err != nil {
		t.Fatalf("admit with the API server stuck: %v", err)
	}
	if _, err := m.kubelet.Admit(ctx, m.bind("ns", "one", oneGPU, map[string][]binding.Share{"main": {m.createShare(0, "1g.10gb", 0)}}), kubeletsim.AdmitOptions{}); err != nil {
		t.Fatalf("admit with the API server stuck: %v", err)
	}
	if l0, l1 := m.gpus[0].Layout(), m.gpus[1].Layout(); l0 != "1g.10gb@0 3g.40gb@4" || l1 != "3g.40gb@4" {
		t.Fatalf("driver layouts %q, %q", l0, l1)
	}
	pub.mu.Lock()
	close(pub.gate)
	pub.gate = nil
	pub.mu.Unlock()
	pub.wait(t, "all instances published", lastIs("1g.10gb@0* 3g.40gb@4*|3g.40gb@4*"))
	if p := pub.published(); len(p) != 2 || layoutOf(p[0]) != "|" {
		var all []string
		for _, n := range p {
			all = append(all, layoutOf(n))
		}
		t.Errorf("publishes %q, want the pending one (empty layout) and one with the three instances", all)
	}
}

// A restarted agent publishes the instances its reconcile adopted as in
// use, so the scheduler sees the slices taken before any new pod arrives;
// the instance of a pod that ended while the agent was down stays
// published in use while a process still holds it and goes once it is
// destroyed; the operator's instance is published free.
func TestMIGRestartPublishesAdopted(t *testing.T) {
	m := newMIGNode(t, 1)
	ctx := context.Background()
	m.restartScene(ctx)

	m.node = m.discovered()
	pub := m.startPublishing(newRecorder())
	pub.wait(t, "the adopted instances", lastIs("3g.40gb@0* 2g.20gb@4* 1g.10gb@6"))
	before := len(pub.published())
	if err := m.agent.Reconcile(ctx); err != nil { // the ended pod's record goes; its instance is busy
		t.Fatal(err)
	}
	pub.wait(t, "the busy instance still in use", func(_ int, p []inventory.Node) bool {
		return len(p) > before && layoutOf(p[len(p)-1]) == "3g.40gb@0* 2g.20gb@4* 1g.10gb@6"
	})
	m.gpus[0].SetBusy(4, false)
	if err := m.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	pub.wait(t, "the ended pod's instance gone", lastIs("3g.40gb@0* 1g.10gb@6"))
	if got := layoutOf(m.agent.Inventory()); got != "3g.40gb@0* 1g.10gb@6" {
		t.Errorf("Inventory %q, want what was published", got)
	}
}

// failingLayout is a manager whose layout reads fail while fail is set.
type failingLayout struct {
	*migctl.Manager
	fail atomic.Bool
}

func (f *failingLayout) Layout() (map[string][]migctl.Placed, error) {
	if f.fail.Load() {
		return nil, errors.New("NVML: GetGpuInstances: Unknown Error")
	}
	return f.Manager.Layout()
}

// A layout the driver cannot list does not stop publishing (health still
// gets out, with the last layout read), and the read is retried without
// another change: once the driver answers, the created instance is
// published.
func TestMIGLayoutReadFailureRetried(t *testing.T) {
	m := newMIGNode(t, 1)
	cfg := m.config()
	pub := newRecorder()
	mig := &failingLayout{Manager: m.manager()}
	mig.fail.Store(true)
	cfg.Publisher, cfg.MIG = pub, mig
	m.startAgent(cfg)
	pub.wait(t, "the first publish", func(_ int, p []inventory.Node) bool { return len(p) >= 1 })
	if _, err := m.kubelet.Admit(context.Background(), m.bind("ns", "mig", oneGPU, map[string][]binding.Share{"main": {m.createShare(0, "3g.40gb", 0)}}), kubeletsim.AdmitOptions{}); err != nil {
		t.Fatalf("admit: %v", err)
	}
	m.agent.SetHealth(m.gpus[0].UUID(), inventory.Unhealthy, "XID 79")
	pub.wait(t, "the health change published with the last layout read", func(_ int, p []inventory.Node) bool {
		n := p[len(p)-1]
		return n.GPUs[0].Health == inventory.Unhealthy && layoutOf(n) == ""
	})
	mig.fail.Store(false)
	pub.wait(t, "the created instance once the driver answers", lastIs("3g.40gb@0*"))
}

// startPublishing starts the agent on m's node with its MIG manager and
// pub as its publisher, and returns pub.
func (m *migNode) startPublishing(pub *recorder) *recorder {
	cfg := m.config()
	cfg.Publisher, cfg.MIG = pub, m.manager()
	m.startAgent(cfg)
	return pub
}
