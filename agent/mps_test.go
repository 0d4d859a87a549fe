package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/arbiter/mps/mpstest"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/kube/gpunode"
)

// setHostIPC marks a bound pod's spec.hostIPC, as the API server reports it.
func (f *fakeAPI) setHostIPC(ns, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pods[ns+"/"+name]
	p.HostIPC = true
	f.pods[ns+"/"+name] = p
}

// poll calls f until it succeeds; the deadline is only reached by a
// broken build.
func poll(t *testing.T, what string, f func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestMPSNode runs an agent on an MPS node: the node arbiter in MPS mode
// with a fake nvidia-cuda-mps-control. A one-GPU container of a hostIPC pod
// gets its GPU's MPS pipe folder (where that GPU's daemon runs), mounted
// read-write at the same path, and its caps; a container of two GPUs and a
// pod without hostIPC are refused at Allocate, naming the pod and the rule,
// and leave nothing recorded; the GPUNode says mps.
func TestMPSNode(t *testing.T) {
	h := newHarness(t, "2xH100-SXM")
	var uuids []string
	for _, g := range h.node.GPUs {
		uuids = append(uuids, g.UUID)
	}
	arb, err := arbiter.New(arbiter.Config{Mode: arbiter.ModeMPS, MPS: mps.Config{Root: mpstest.ShortDir(t), Binary: mpstest.Write(t), GPUs: uuids}})
	if err != nil {
		t.Fatal(err)
	}
	actx, stopArb := context.WithCancel(context.Background())
	arbDone := make(chan error, 1)
	go func() { arbDone <- arb.Run(actx) }()
	t.Cleanup(func() {
		stopArb()
		if err := <-arbDone; err != nil {
			t.Errorf("arbiter Run: %v", err)
		}
	})
	for _, u := range uuids {
		poll(t, "MPS daemon of "+u, func() error {
			if !mpstest.Running(arb.MPS().PipeDir(u)) {
				return errors.New("not running")
			}
			return nil
		})
	}

	core := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gpunode.Resource(): "GPUNodeList"})
	cfg := h.config()
	cfg.Enforcer = arbiter.Enforcer{Arbiter: arb}
	cfg.MPS = arb
	cfg.Publisher = &kube.Publisher{Core: core, Dynamic: dyn, SlotsPerGPU: 8, Sharing: gpunode.SharingMPS}
	h.startAgent(cfg)

	// One GPU, hostIPC: the MPS client environment and the pipe folder.
	s := h.share(1, 300, 450, 2048) // memory limit 4096 MiB
	p := h.bind("team", "infer", oneGPU, map[string][]binding.Share{"main": {s}})
	h.api.setHostIPC("team", "infer")
	got, err := h.kubelet.Admit(context.Background(), p, kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	a := got["main"]
	pipe := arb.MPS().PipeDir(s.UUID)
	wantEnv := map[string]string{
		handoff.EnvMPSPipeDir: pipe, handoff.EnvMPSThreadPercentage: "45", handoff.EnvMPSPinnedMemLimit: "0=4096M",
		"CUDA_VISIBLE_DEVICES": s.UUID, "TESSERA_COMPUTE_LIMIT": "450m", "TESSERA_MEMORY_LIMIT": "4096Mi",
	}
	for k, v := range wantEnv {
		if a.Envs[k] != v {
			t.Errorf("%s = %q, want %q", k, a.Envs[k], v)
		}
	}
	if !mpstest.Running(a.Envs[handoff.EnvMPSPipeDir]) {
		t.Errorf("no MPS daemon answers in the container's pipe folder %s", a.Envs[handoff.EnvMPSPipeDir])
	}
	if a.Mounts[pipe] != pipe || a.ReadOnly[pipe] {
		t.Errorf("mounts %v (read-only %v): want %s read-write at the same path", a.Mounts, a.ReadOnly, pipe)
	}
	if err := h.kubelet.Start(context.Background(), "team", "infer"); err != nil {
		t.Errorf("start: %v", err)
	}
	if got := seats(arb); len(got) != 1 {
		t.Errorf("arbiter seats = %v, want the one container", got)
	}

	// Refused: two GPUs, and a pod without hostIPC.
	two := []kubeletsim.Container{{Name: "main", Devices: 2}}
	wide := h.bind("team", "wide", two, map[string][]binding.Share{"main": {h.share(0, 200, 200, 1024), h.share(1, 200, 200, 1024)}})
	h.api.setHostIPC("team", "wide")
	private := h.bind("team", "private", oneGPU, map[string][]binding.Share{"main": {h.share(0, 200, 200, 1024)}})
	for _, tc := range []struct {
		pod  kubeletsim.Pod
		want string
	}{
		{wide, "pod team/wide container main: annotation tessera.io/assignment assigns 2 GPUs; on MPS node " + nodeName + " (--sharing mps) a container must use exactly one GPU"},
		{private, "pod team/private container main: spec.hostIPC must be true on MPS node " + nodeName},
	} {
		_, err := h.kubelet.Admit(context.Background(), tc.pod, kubeletsim.AdmitOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("admit %s: %v, want %q", tc.pod.Name, err, tc.want)
		}
		for _, e := range h.agent.Allocations() {
			if e.Pod == tc.pod.Name {
				t.Errorf("refused pod %s left an allocation record %s", tc.pod.Name, e.Key)
			}
		}
		h.kubelet.Remove(tc.pod.Namespace, tc.pod.Name)
	}
	if got := seats(arb); len(got) != 1 {
		t.Errorf("after refusals, arbiter seats = %v, want the one container", got)
	}

	// The published GPUNode says mps for every GPU.
	poll(t, "GPUNode published", func() error {
		obj, err := dyn.Resource(gpunode.Resource()).Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		modes, err := gpunode.Sharing(obj)
		if err != nil {
			return err
		}
		for _, u := range uuids {
			if modes[u] != gpunode.SharingMPS {
				return fmt.Errorf("sharing = %v, want mps for every GPU", modes)
			}
		}
		return nil
	})
}

// TestMPSNeedsTheArbiter: MPS mode without an enforcer is a configuration
// error, since ClientEnv knows only registered containers.
func TestMPSNeedsTheArbiter(t *testing.T) {
	h := newHarness(t, "1xH100-SXM")
	arb, err := arbiter.New(arbiter.Config{Mode: arbiter.ModeMPS, MPS: mps.Config{Root: mpstest.ShortDir(t), Binary: mpstest.Write(t), GPUs: []string{h.node.GPUs[0].UUID}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.config()
	cfg.MPS = arb
	if _, err := agent.New(cfg); err == nil || !strings.Contains(err.Error(), "MPS mode needs an enforcer") {
		t.Errorf("agent.New: %v, want the MPS rule", err)
	}
}
