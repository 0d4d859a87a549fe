package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/binding"
)

// seats counts the arbiter's registered containers by key.
func seats(a *arbiter.Arbiter) map[string]int {
	out := map[string]int{}
	for _, s := range a.Snapshot() {
		out[s.Key]++
	}
	return out
}

// TestAllocationsAreEnforcedByTheArbiter: every allocation gets a grant
// region and an arbiter seat; a container whose guarantee would overbook a
// GPU is refused at Allocate; a restarted agent re-registers what it
// recorded; a finished pod's seat is released.
func TestAllocationsAreEnforcedByTheArbiter(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	cfg := h.config()
	arb := h.startEnforced(cfg)
	wants := bindMany(h, 4) // four identical 100m shares of GPU 0
	keys := admitAll(t, h, wants)
	for key := range keys {
		if _, err := os.Stat(filepath.Join(h.dir, "run", key, arbiter.RegionFile)); err != nil {
			t.Errorf("no grant region for %s: %v", key, err)
		}
	}
	if got := seats(arb); len(got) != 4 {
		t.Fatalf("arbiter seats = %v, want 4 containers", got)
	}

	big := h.share(0, 700, 1000, 1024) // 4 x 100 + 700 > 1000 on GPU 0
	p := h.bind("team", "greedy", oneGPU, map[string][]binding.Share{"main": {big}})
	_, err := h.kubelet.Admit(context.Background(), p, kubeletsim.AdmitOptions{})
	if err == nil || !strings.Contains(err.Error(), "enforce GPU shares") || !strings.Contains(err.Error(), "must be at most 1000") {
		t.Fatalf("overbooking admit: %v", err)
	}
	h.kubelet.Remove("team", "greedy")

	// A new agent process with a new arbiter re-registers the checkpoint.
	h.stopAgent()
	arb2 := h.startEnforced(cfg)
	if got := seats(arb2); len(got) != 4 {
		t.Fatalf("after restart, arbiter seats = %v, want 4", got)
	}
	for _, w := range wants[:2] {
		h.kubelet.Remove(w.pod.Namespace, w.pod.Name)
		h.api.remove(w.pod.Namespace, w.pod.Name)
	}
	if err := h.agent.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := seats(arb2); len(got) != 2 {
		t.Fatalf("after two pods finished, arbiter seats = %v, want 2", got)
	}
}

// TestAllocateReleasesDeletedPodsFirst: the scheduler binds a pod to the
// room a deleted pod left as soon as the deletion is visible, and kubelet
// may call Allocate for it before the agent's periodic reconcile has run
// (found on the real node). Allocate releases the shares of pods kubelet no
// longer lists before it registers the new one, instead of refusing it as
// an overbooking (which kubelet turns into a failed pod).
func TestAllocateReleasesDeletedPodsFirst(t *testing.T) {
	h := newHarness(t, "1xH100-SXM")
	cfg := h.config() // ReconcileInterval: an hour, so only Allocate can release
	arb := h.startEnforced(cfg)
	admit := func(name string) error {
		p := h.bind("team", name, oneGPU, map[string][]binding.Share{"main": {h.share(0, 500, 1000, 1024)}})
		_, err := h.kubelet.Admit(context.Background(), p, kubeletsim.AdmitOptions{})
		return err
	}
	for _, name := range []string{"a", "b"} {
		if err := admit(name); err != nil {
			t.Fatalf("admit %s: %v", name, err)
		}
	}
	// a is deleted: gone from kubelet and the API server, but the agent
	// has not reconciled.
	h.kubelet.Remove("team", "a")
	h.api.remove("team", "a")
	if got := seats(arb); len(got) != 2 {
		t.Fatalf("before c, arbiter seats = %v, want a's and b's", got)
	}
	if err := admit("c"); err != nil {
		t.Fatalf("admit c into the room a left: %v", err)
	}
	if got := seats(arb); len(got) != 2 {
		t.Fatalf("after c, arbiter seats = %v, want b's and c's", got)
	}
	// A fourth half still overbooks: nothing was released that runs.
	if err := admit("d"); err == nil || !strings.Contains(err.Error(), "enforce GPU shares") {
		t.Fatalf("admit d on a full GPU: %v, want an overbooking refusal", err)
	}
}

// TestKubeletStartingUpKeepsAllocations: a restarted kubelet serves its
// PodResources API before it has re-added the pods it runs, and lists none
// of them meanwhile. A release in that window must not drop the shares of
// running containers: a new agent process would then not recover them
// (found on the real node, test/e2enode: after "kubelet restart", the
// agent deleted in "agent pod deleted" came back with one of two halves).
// Pods that ended meanwhile are still released.
func TestKubeletStartingUpKeepsAllocations(t *testing.T) {
	h := newHarness(t, "1xH100-SXM")
	cfg := h.config()
	arb := h.startEnforced(cfg)
	ctx := context.Background()
	keys := map[string]string{} // pod -> key
	for _, name := range []string{"a", "b", "deleted", "finished"} {
		s := h.share(0, 250, 1000, 1024)
		p := h.bind("team", name, oneGPU, map[string][]binding.Share{"main": {s}})
		got, err := h.kubelet.Admit(ctx, p, kubeletsim.AdmitOptions{})
		if err != nil {
			t.Fatalf("admit %s: %v", name, err)
		}
		keys[name] = checkHandoff(t, h, want{pod: p, shares: []binding.Share{s}}, got["main"])
		if err := h.kubelet.Start(ctx, "team", name); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
	}
	if err := h.kubelet.RestartStarting(); err != nil {
		t.Fatal(err)
	}
	h.waitRegistered(2)
	// While kubelet starts, one pod is deleted (gone from the API server)
	// and one finishes (Succeeded there); kubelet will list neither.
	h.kubelet.Remove("team", "deleted")
	h.api.remove("team", "deleted")
	h.kubelet.Remove("team", "finished")
	fin, _, _ := h.api.Pod(ctx, "team", "finished")
	fin.Terminal = true
	h.api.put(fin)
	if err := h.agent.Reconcile(ctx); err != nil {
		t.Fatalf("reconcile while kubelet starts: %v", err)
	}
	wantKept := map[string]int{keys["a"]: 1, keys["b"]: 1}
	if got := seats(arb); fmt.Sprint(got) != fmt.Sprint(wantKept) {
		t.Errorf("after a release while kubelet starts, arbiter seats = %v, want a's and b's %v", got, wantKept)
	}
	checkRecorded(t, h, map[string]string{keys["a"]: "a", keys["b"]: "b"})
	if got := len(h.agent.Allocations()); got != 2 {
		t.Errorf("after a release while kubelet starts, the agent records %d allocations, want a's and b's", got)
	}

	// kubelet has re-added its pods; a new agent process recovers both
	// running containers from its checkpoint.
	h.kubelet.Synced()
	h.stopAgent()
	arb2 := h.startEnforced(cfg)
	if got := seats(arb2); fmt.Sprint(got) != fmt.Sprint(wantKept) {
		t.Errorf("a restarted agent's arbiter seats = %v, want a's and b's %v", got, wantKept)
	}
	if err := h.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := seats(arb2); fmt.Sprint(got) != fmt.Sprint(wantKept) {
		t.Errorf("after a reconcile with kubelet synced, arbiter seats = %v, want a's and b's %v", got, wantKept)
	}
}

// startEnforced starts the agent with cfg and a fresh arbiter as its
// enforcer (as a new agent process would have), and returns the arbiter.
func (h *harness) startEnforced(cfg agent.Config) *arbiter.Arbiter {
	h.t.Helper()
	arb, err := arbiter.New(arbiter.Config{})
	if err != nil {
		h.t.Fatal(err)
	}
	cfg.Enforcer = arbiter.Enforcer{Arbiter: arb}
	h.startAgent(cfg)
	return arb
}
