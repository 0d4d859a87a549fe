package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/inventory"
)

const nodeName = "gpu-node-0"

// fakeAPI is the API server's view of the pods bound to the node.
type fakeAPI struct {
	mu   sync.Mutex
	pods map[string]handoff.Pod
}

func (f *fakeAPI) Pod(_ context.Context, ns, name string) (handoff.Pod, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[ns+"/"+name]
	return p, ok, nil
}

func (f *fakeAPI) OnNode(context.Context) ([]handoff.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]handoff.Pod, 0, len(f.pods))
	for _, p := range f.pods {
		out = append(out, p)
	}
	return out, nil
}

func (f *fakeAPI) put(p handoff.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[p.Namespace+"/"+p.Name] = p
}

func (f *fakeAPI) remove(ns, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, ns+"/"+name)
}

// harness runs a kubelet stand-in and an agent on one simulated node.
type harness struct {
	t        *testing.T
	dir      string
	node     inventory.Node
	api      *fakeAPI
	kubelet  *kubeletsim.Kubelet
	agent    *agent.Agent
	kubePods agent.KubeletPods
	cancel   context.CancelFunc
	done     chan error
	created  time.Time
}

func newHarness(t *testing.T, spec string) *harness {
	t.Helper()
	dir, err := os.MkdirTemp("", "ta") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, err := discovery.Open("sim:"+spec, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, node: nodes[0], api: &fakeAPI{pods: map[string]handoff.Pod{}}, created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.kubelet, err = kubeletsim.Start(h.pluginDir(), h.podResourcesSocket(), kube.ResourceGPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.kubelet.Stop)
	pr, err := kube.NewPodResources(h.podResourcesSocket(), kube.ResourceGPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	h.kubePods = pr
	return h
}

func (h *harness) pluginDir() string          { return filepath.Join(h.dir, "dp") }
func (h *harness) podResourcesSocket() string { return filepath.Join(h.dir, "pr.sock") }
func (h *harness) stateDir() string           { return filepath.Join(h.dir, "state") }

// interceptLib is a stand-in interception library file (the agent refuses
// to start without the file it is told to hand out).
func (h *harness) interceptLib() string {
	h.t.Helper()
	lib := filepath.Join(h.dir, "lib", "libtessera-intercept.so")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("\x7fELF stand-in"), 0o755); err != nil {
		h.t.Fatal(err)
	}
	return lib
}

func (h *harness) config() agent.Config {
	return agent.Config{
		NodeName: nodeName, Node: h.node, SlotsPerGPU: 8, ResourceName: kube.ResourceGPU,
		PluginDir: h.pluginDir(), StateDir: h.stateDir(),
		Paths: handoff.Paths{HostStateRoot: filepath.Join(h.dir, "run"), HostArbiterDir: "/run/tessera/arbiter", HostInterceptLibrary: h.interceptLib()},
		Pods:  h.api, Kubelet: h.kubePods, PluginCheckInterval: 20 * time.Millisecond,
		ReconcileInterval: time.Hour,
		Log:               slog.New(slog.NewTextHandler(testWriter{h.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// startAgent starts an agent and waits until kubelet lists its devices.
func (h *harness) startAgent(cfg agent.Config) {
	h.t.Helper()
	a, err := agent.New(cfg)
	if err != nil {
		h.t.Fatalf("new agent: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.cancel, h.done = a, cancel, make(chan error, 1)
	before := h.kubelet.Registrations()
	go func() { h.done <- a.Run(ctx) }()
	h.t.Cleanup(h.stopAgent)
	h.waitRegistered(before + 1)
}

func (h *harness) stopAgent() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Errorf("agent Run: %v", err)
	}
	h.cancel = nil
}

// waitRegistered waits for n registrations and a full healthy device list.
func (h *harness) waitRegistered(n int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := len(h.node.GPUs) * 8
	err := h.kubelet.WaitDevices(ctx, func(d map[string]string) bool {
		return h.kubelet.Registrations() >= n && len(d) == want
	})
	if err != nil {
		h.t.Fatalf("registration %d: %v", n, err)
	}
}

// bind records a pod as the scheduler would: bound to the node with an
// assignment giving container c the GPUs at indexes with the given shares.
func (h *harness) bind(ns, name string, containers []kubeletsim.Container, shares map[string][]binding.Share) kubeletsim.Pod {
	h.t.Helper()
	a := binding.Assignment{Version: binding.Version, Node: nodeName}
	for _, c := range containers {
		if s, ok := shares[c.Name]; ok {
			a.Containers = append(a.Containers, binding.Container{Name: c.Name, GPUs: s})
		}
	}
	enc, err := binding.Encode(a)
	if err != nil {
		h.t.Fatalf("encode assignment: %v", err)
	}
	return h.bindRaw(ns, name, containers, &enc)
}

// bindRaw binds a pod with a raw annotation value (nil: none).
func (h *harness) bindRaw(ns, name string, containers []kubeletsim.Container, annotation *string) kubeletsim.Pod {
	h.created = h.created.Add(time.Second)
	p := kubeletsim.Pod{Namespace: ns, Name: name, UID: fmt.Sprintf("uid-%s-%s", ns, name), Containers: containers}
	hp := handoff.Pod{Namespace: ns, Name: name, UID: p.UID, Created: h.created}
	for _, c := range containers {
		if c.Devices > 0 {
			hp.Containers = append(hp.Containers, handoff.ContainerRequest{Name: c.Name, Devices: c.Devices})
		}
	}
	if annotation != nil {
		hp.Assignment, hp.HasAssignment = *annotation, true
	}
	h.api.put(hp)
	return p
}

// share is a share of GPU index i.
func (h *harness) share(i int, compute, limit, memMiB int64) binding.Share {
	g, ok := h.node.GPUByIndex(i)
	if !ok {
		h.t.Fatalf("no GPU %d", i)
	}
	return binding.Share{UUID: g.UUID, Index: i, ComputeMilli: compute, ComputeLimitMilli: limit, MemoryMiB: memMiB, MemoryLimitMiB: memMiB * 2}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
