package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
)

// admitAll admits pods and checks each handoff; it returns key -> pod name.
func admitAll(t *testing.T, h *harness, wants []want) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for _, w := range wants {
		got, err := h.kubelet.Admit(context.Background(), w.pod, kubeletsim.AdmitOptions{})
		if err != nil {
			t.Fatalf("admit %s: %v", w.pod.Name, err)
		}
		keys[checkHandoff(t, h, w, got["main"])] = w.pod.Name
	}
	return keys
}

func startAll(t *testing.T, h *harness, wants []want) {
	t.Helper()
	for _, w := range wants {
		if err := h.kubelet.Start(context.Background(), w.pod.Namespace, w.pod.Name); err != nil {
			t.Fatalf("start %s: %v", w.pod.Name, err)
		}
	}
}

func TestKubeletRestartReregistersAndKeepsAllocations(t *testing.T) {
	h := newHarness(t, "4xH100-SXM")
	h.startAgent(h.config())
	wants := bindMany(h, 16)
	keys := admitAll(t, h, wants[:8])
	if err := h.kubelet.Restart(); err != nil { // removes the plugin's socket too
		t.Fatal(err)
	}
	h.waitRegistered(2)
	startAll(t, h, wants[:8]) // containers of old pods restart: PreStart passes
	for k, v := range admitAll(t, h, wants[8:]) {
		keys[k] = v
	}
	startAll(t, h, wants[8:])
	checkRecorded(t, h, keys)
	if got := h.kubelet.Registrations(); got != 2 {
		t.Errorf("registrations = %d, want 2", got)
	}
}

func TestAgentRestartKeepsRunningContainersAssignments(t *testing.T) {
	h := newHarness(t, "4xH100-SXM")
	h.startAgent(h.config())
	wants := bindMany(h, 16)
	keys := admitAll(t, h, wants[:8])
	startAll(t, h, wants[:8])
	h.stopAgent()
	h.startAgent(h.config()) // a new process: reads the checkpoint
	if got := len(h.agent.Allocations()); got != 8 {
		t.Fatalf("after restart the agent knows %d allocations, want 8", got)
	}
	startAll(t, h, wants[:8])
	for k, v := range admitAll(t, h, wants[8:]) {
		keys[k] = v
	}
	startAll(t, h, wants[8:])
	checkRecorded(t, h, keys)
}

func TestLostCheckpointIsRebuiltFromKubeletAtContainerStart(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	h.startAgent(h.config())
	wants := bindMany(h, 6)
	keys := admitAll(t, h, wants)
	h.stopAgent()
	if err := os.Remove(filepath.Join(h.stateDir(), agent.CheckpointFile)); err != nil {
		t.Fatal(err)
	}
	h.startAgent(h.config())
	startAll(t, h, wants) // container restarts: identities come from kubelet
	checkRecorded(t, h, keys)
}

func TestBothRestartWhileManyPodsAreBound(t *testing.T) {
	h := newHarness(t, "4xH100-SXM")
	h.startAgent(h.config())
	wants := bindMany(h, 24)
	keys := admitAll(t, h, wants[:8])
	h.stopAgent()
	if err := h.kubelet.Restart(); err != nil {
		t.Fatal(err)
	}
	h.startAgent(h.config())
	for k, v := range admitAll(t, h, wants[8:16]) {
		keys[k] = v
	}
	if err := h.kubelet.Restart(); err != nil {
		t.Fatal(err)
	}
	h.waitRegistered(3)
	for k, v := range admitAll(t, h, wants[16:]) {
		keys[k] = v
	}
	startAll(t, h, wants)
	checkRecorded(t, h, keys)
}

func TestUnhealthyGPUSlotsTurnUnhealthyInKubelet(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	h.startAgent(h.config())
	bad := h.node.GPUs[1].UUID
	h.agent.SetHealth(bad, inventory.Unhealthy, "XID 79: GPU has fallen off the bus")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := h.kubelet.WaitDevices(ctx, func(d map[string]string) bool {
		for id, health := range d {
			u, _, _ := handoff.ParseSlot(id)
			if (u == bad) != (health == "Unhealthy") {
				return false
			}
		}
		return len(d) > 0
	})
	if err != nil {
		t.Fatalf("unhealthy GPU not reported: %v (devices %v)", err, h.kubelet.Devices())
	}
	inv := h.agent.Inventory()
	if g, _ := inv.GPUByIndex(1); g.Health != inventory.Unhealthy {
		t.Errorf("inventory health = %s, want Unhealthy", g.Health)
	}
}

// flakyKubelet is kubelet's PodResources API that is down while down is set.
type flakyKubelet struct {
	agent.KubeletPods
	down atomic.Bool
}

func (f *flakyKubelet) List(ctx context.Context) ([]handoff.KubeletPod, error) {
	if f.down.Load() {
		return nil, errors.New("connection refused")
	}
	return f.KubeletPods.List(ctx)
}

func TestIdenticalCandidatesArePickedByAgeAndRelabelledAtStart(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	flaky := &flakyKubelet{KubeletPods: h.kubePods}
	cfg := h.config()
	cfg.Kubelet = flaky
	h.startAgent(cfg)
	s := h.share(0, 100, 500, 4096)
	h.bind("team", "older", oneGPU, map[string][]binding.Share{"main": {s}})
	newer := h.bind("team", "newer", oneGPU, map[string][]binding.Share{"main": {s}})
	flaky.down.Store(true) // the agent cannot ask kubelet which pod it admits
	got, err := h.kubelet.Admit(context.Background(), newer, kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	checkHandoff(t, h, want{pod: newer, shares: []binding.Share{s}}, got["main"]) // identical either way
	flaky.down.Store(false)
	if err := h.kubelet.Start(context.Background(), "team", "newer"); err != nil {
		t.Fatalf("start: %v", err)
	}
	entry := h.agent.Allocations()[0]
	if entry.Pod != "newer" || !entry.Verified || entry.Key != got["main"].Envs["TESSERA_CONTAINER_ID"] {
		t.Errorf("entry = %s/%s verified=%v key=%s; want newer, verified, the container's key", entry.Namespace, entry.Pod, entry.Verified, entry.Key)
	}
}

func TestDifferentCandidatesWithoutKubeletFailRatherThanGuess(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	flaky := &flakyKubelet{KubeletPods: h.kubePods}
	flaky.down.Store(true)
	cfg := h.config()
	cfg.Kubelet = flaky
	h.startAgent(cfg)
	h.bind("team", "a", oneGPU, map[string][]binding.Share{"main": {h.share(0, 100, 500, 4096)}})
	b := h.bind("team", "b", oneGPU, map[string][]binding.Share{"main": {h.share(0, 200, 500, 4096)}})
	_, err := h.kubelet.Admit(context.Background(), b, kubeletsim.AdmitOptions{})
	if err == nil || !strings.Contains(err.Error(), "cannot tell which of") {
		t.Fatalf("admit error = %v, want an ambiguity error", err)
	}
}
