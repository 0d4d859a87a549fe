package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/migctl"
)

// fakeMIG records the instances the agent asks for, by container.
type fakeMIG struct {
	mu      sync.Mutex
	held    map[string][]migctl.Want
	refuse  error
	release []string
}

func (f *fakeMIG) Acquire(workload string, w migctl.Want) (migctl.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return migctl.Instance{}, f.refuse
	}
	f.held[workload] = append(f.held[workload], w)
	return migctl.Instance{Profile: w.Profile, Start: w.Start, UUID: fmt.Sprintf("MIG-new-%d", w.Start)}, nil
}

func (f *fakeMIG) Release(workload string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, workload)
	f.release = append(f.release, workload)
	return nil
}

func (f *fakeMIG) holds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held)
}

// An assignment asking the node to create a MIG instance gets it created
// at the chosen slot before the container does, and the container is
// handed the new instance's UUID, not its parent's; when creation fails
// the container is refused and nothing stays booked; an agent that
// manages no MIG GPU refuses such an assignment, naming it.
func TestMIGInstanceCreatedAtAllocate(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	mig := &fakeMIG{held: map[string][]migctl.Want{}}
	cfg := h.config()
	cfg.MIG = mig
	h.startAgent(cfg)
	ctx := context.Background()
	parent, _ := h.node.GPUByIndex(0)
	share := binding.Share{UUID: parent.UUID, Index: 0, ComputeMilli: 142, ComputeLimitMilli: 142, MemoryMiB: 9984, MemoryLimitMiB: 9984,
		MIGProfile: "1g.10gb", MIG: &binding.MIGInstance{GPU: parent.UUID, Start: 3, Create: true}}
	pod := h.bind("ns", "mig", oneGPU, map[string][]binding.Share{"main": {share}})
	got, err := h.kubelet.Admit(ctx, pod, kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	if env := got["main"].Envs; env["CUDA_VISIBLE_DEVICES"] != "MIG-new-3" || env["NVIDIA_VISIBLE_DEVICES"] != "MIG-new-3" {
		t.Errorf("container devices %q / %q, want the created instance MIG-new-3", env["CUDA_VISIBLE_DEVICES"], env["NVIDIA_VISIBLE_DEVICES"])
	}
	if mig.holds() != 1 {
		t.Fatalf("instances held: %v", mig.held)
	}
	for _, w := range mig.held {
		if len(w) != 1 || w[0] != (migctl.Want{GPU: parent.UUID, Profile: "1g.10gb", Start: 3}) {
			t.Errorf("created %+v", w)
		}
	}

	mig.refuse = errors.New("insufficient resources")
	pod = h.bind("ns", "refused", oneGPU, map[string][]binding.Share{"main": {share}})
	if _, err := h.kubelet.Admit(ctx, pod, kubeletsim.AdmitOptions{}); err == nil || !strings.Contains(err.Error(), "create MIG instance: insufficient resources") {
		t.Errorf("admit with creation refused: %v", err)
	}
	if mig.holds() != 1 {
		t.Errorf("a refused container holds instances: %v", mig.held)
	}
}

func TestMIGCreateWithoutManagedGPUs(t *testing.T) {
	h := newHarness(t, "1xH100-SXM")
	h.startAgent(h.config())
	parent, _ := h.node.GPUByIndex(0)
	share := binding.Share{UUID: parent.UUID, Index: 0, ComputeMilli: 142, ComputeLimitMilli: 142, MemoryMiB: 9984, MemoryLimitMiB: 9984,
		MIGProfile: "1g.10gb", MIG: &binding.MIGInstance{GPU: parent.UUID, Start: 3, Create: true}}
	pod := h.bind("ns", "mig", oneGPU, map[string][]binding.Share{"main": {share}})
	if _, err := h.kubelet.Admit(context.Background(), pod, kubeletsim.AdmitOptions{}); err == nil || !strings.Contains(err.Error(), "manages no MIG GPU") {
		t.Errorf("admit: %v, want a refusal saying the agent manages no MIG GPU", err)
	}
}
