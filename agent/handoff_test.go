package agent_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
)

var oneGPU = []kubeletsim.Container{{Name: "main", Devices: 1}}

// want is the handoff a pod's container must get.
type want struct {
	pod    kubeletsim.Pod
	shares []binding.Share
}

// bindMany binds n single-container pods that all request one device;
// their assignments differ (GPU, compute, memory) except the last four,
// which are identical to each other.
func bindMany(h *harness, n int) []want {
	var out []want
	for i := range n {
		s := h.share(i%len(h.node.GPUs), int64(50+10*(i/len(h.node.GPUs))), 900, int64(1024*(1+i%3)))
		if i >= n-4 {
			s = h.share(0, 100, 500, 4096)
		}
		name := fmt.Sprintf("p%02d", i)
		out = append(out, want{pod: h.bind("team", name, oneGPU, map[string][]binding.Share{"main": {s}}), shares: []binding.Share{s}})
	}
	return out
}

// checkHandoff asserts a container got exactly its own shares.
func checkHandoff(t *testing.T, h *harness, w want, got *kubeletsim.Allocation) string {
	t.Helper()
	var uuids, req, lim, mem []string
	for _, s := range w.shares {
		uuids = append(uuids, s.UUID)
		req = append(req, fmt.Sprintf("%dm", s.ComputeMilli))
		lim = append(lim, fmt.Sprintf("%dm", s.ComputeLimitMilli))
		mem = append(mem, fmt.Sprintf("%dMi", s.MemoryLimitMiB))
	}
	env := got.Envs
	for k, v := range map[string]string{
		"NVIDIA_VISIBLE_DEVICES": strings.Join(uuids, ","), "CUDA_VISIBLE_DEVICES": strings.Join(uuids, ","),
		"TESSERA_COMPUTE_REQUEST": strings.Join(req, ","), "TESSERA_COMPUTE_LIMIT": strings.Join(lim, ","),
		"TESSERA_MEMORY_LIMIT": strings.Join(mem, ","), "TESSERA_SHM_DIR": handoff.ContainerStateDir,
		"TESSERA_ARBITER_REGION": handoff.ContainerGrantRegion, "LD_PRELOAD": handoff.ContainerInterceptLibrary,
	} {
		if env[k] != v {
			t.Errorf("pod %s: %s = %q, want %q", w.pod.Name, k, env[k], v)
		}
	}
	key := env["TESSERA_CONTAINER_ID"]
	if got.Mounts[handoff.ContainerStateDir] != filepath.Join(h.dir, "run", key) {
		t.Errorf("pod %s: state mount %q, want the folder of key %s", w.pod.Name, got.Mounts[handoff.ContainerStateDir], key)
	}
	return key
}

// checkRecorded asserts the checkpoint maps every key to its own pod.
func checkRecorded(t *testing.T, h *harness, keys map[string]string) {
	t.Helper()
	entries := map[string]string{}
	for _, e := range h.agent.Allocations() {
		entries[e.Key] = e.Pod
		if !e.Verified {
			t.Errorf("entry %s of pod %s is not verified", e.Key, e.Pod)
		}
	}
	for key, pod := range keys {
		if entries[key] != pod {
			t.Errorf("checkpoint: key %s belongs to %q, want pod %s", key, entries[key], pod)
		}
	}
}

func TestManyPodsBoundAtOnceEachGetTheirOwnShares(t *testing.T) {
	h := newHarness(t, "4xH100-SXM")
	h.startAgent(h.config())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wants := bindMany(h, 32) // every pod is bound before kubelet admits any
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(wants))
	for _, i := range order { // kubelet's order need not be creation order
		if _, err := h.kubelet.Admit(ctx, wants[i].pod, kubeletsim.AdmitOptions{}); err != nil {
			t.Fatalf("admit %s: %v", wants[i].pod.Name, err)
		}
	}
	var wg sync.WaitGroup // containers start concurrently
	errs := make(chan error, len(wants))
	for _, w := range wants {
		wg.Go(func() { errs <- h.kubelet.Start(ctx, w.pod.Namespace, w.pod.Name) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("start: %v", err)
		}
	}
	keys := map[string]string{}
	for _, w := range wants {
		key := checkHandoff(t, h, w, h.kubelet.Allocations(w.pod.Namespace, w.pod.Name)["main"])
		if other, dup := keys[key]; dup {
			t.Errorf("pods %s and %s share container ID %s", other, w.pod.Name, key)
		}
		keys[key] = w.pod.Name
	}
	checkRecorded(t, h, keys)
}

func TestAdmissionInCreationOrderPutsSlotsOnTheAssignedGPUs(t *testing.T) {
	h := newHarness(t, "4xH100-SXM")
	h.startAgent(h.config())
	ctx := context.Background()
	wants := bindMany(h, 12)
	for _, w := range wants {
		got, err := h.kubelet.Admit(ctx, w.pod, kubeletsim.AdmitOptions{})
		if err != nil {
			t.Fatalf("admit %s: %v", w.pod.Name, err)
		}
		units, err := handoff.UnitsOf(got["main"].DeviceIDs)
		if err != nil || len(units) != 1 || units[0] != w.shares[0].UUID {
			t.Errorf("pod %s: kubelet took devices %v, want a slot of %s", w.pod.Name, got["main"].DeviceIDs, w.shares[0].UUID)
		}
	}
}

func TestKubeletIgnoringThePreferenceStillGetsTheAssignment(t *testing.T) {
	h := newHarness(t, "4xH100-SXM")
	h.startAgent(h.config())
	ctx := context.Background()
	for _, w := range bindMany(h, 8) {
		got, err := h.kubelet.Admit(ctx, w.pod, kubeletsim.AdmitOptions{IgnorePreferred: true})
		if err != nil {
			t.Fatalf("admit %s: %v", w.pod.Name, err)
		}
		checkHandoff(t, h, w, got["main"])
	}
}

func TestMultiContainerPodGetsPerContainerShares(t *testing.T) {
	h := newHarness(t, "4xH100-SXM")
	h.startAgent(h.config())
	containers := []kubeletsim.Container{{Name: "sidecar"}, {Name: "train", Devices: 2}, {Name: "eval", Devices: 1}}
	train := []binding.Share{h.share(2, 1000, 1000, 8192), h.share(3, 1000, 1000, 8192)}
	eval := []binding.Share{h.share(1, 250, 500, 2048)}
	pod := h.bind("ml", "job", containers, map[string][]binding.Share{"train": train, "eval": eval})
	got, err := h.kubelet.Admit(context.Background(), pod, kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	if _, touched := got["sidecar"]; touched {
		t.Errorf("a container that asks for nothing got an allocation")
	}
	checkHandoff(t, h, want{pod: pod, shares: train}, got["train"])
	checkHandoff(t, h, want{pod: pod, shares: eval}, got["eval"])
}

func TestBadAssignmentsFailAllocateAndTheAgentKeepsServing(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	h.startAgent(h.config())
	ctx := context.Background()
	malformed := `{"v":1,"node":"gpu-node-0","containers":[{"name":"main","gpus":[{"uuid":"x","compute":0}]}]}`
	otherNode, _ := binding.Encode(binding.Assignment{Version: 1, Node: "elsewhere", Containers: []binding.Container{{Name: "main", GPUs: []binding.Share{h.share(0, 100, 100, 10)}}}})
	unknownGPU, _ := binding.Encode(binding.Assignment{Version: 1, Node: nodeName, Containers: []binding.Container{{Name: "main", GPUs: []binding.Share{{UUID: "GPU-nope", ComputeMilli: 100, ComputeLimitMilli: 100, MemoryMiB: 1, MemoryLimitMiB: 1}}}}})
	for _, tc := range []struct {
		name       string
		annotation *string
		wantErr    string
	}{
		{"missing", nil, "annotation tessera.io/assignment is missing"},
		{"not-json", ptr("{"), "decode assignment"},
		{"invalid", &malformed, "compute: must be in [1, 1000], got 0"},
		{"other-node", &otherNode, `assignment.node is "elsewhere"`},
		{"unknown-gpu", &unknownGPU, `"GPU-nope" is not a GPU of node`},
	} {
		pod := h.bindRaw("bad", tc.name, oneGPU, tc.annotation)
		_, err := h.kubelet.Admit(ctx, pod, kubeletsim.AdmitOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "bad/"+tc.name) {
			t.Errorf("%s: admit error %v, want one naming the pod and %q", tc.name, err, tc.wantErr)
		}
		h.api.remove("bad", tc.name) // the pod failed admission and is gone
	}
	good := h.share(1, 300, 300, 100)
	pod := h.bind("ok", "after", oneGPU, map[string][]binding.Share{"main": {good}})
	got, err := h.kubelet.Admit(ctx, pod, kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatalf("admit after failures: %v", err)
	}
	checkHandoff(t, h, want{pod: pod, shares: []binding.Share{good}}, got["main"])
}

func ptr(s string) *string { return &s }
