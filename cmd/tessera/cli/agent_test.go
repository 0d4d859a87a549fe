package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/arbiter/mps/mpstest"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

func TestAgentFlagValidation(t *testing.T) {
	base := []string{"agent", "--node-name", "n1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--node-name", ""}, "--node-name: must be set"},
		{append(base, "--slots-per-gpu", "0"), "--slots-per-gpu: must be in [1, 1000], got 0"},
		{append(base, "--sharing", "timeslice"), `--sharing: must be shared, exclusive or mps (MIG GPUs are reported as mig), got "timeslice"`},
		{append(base, "--mps-root", "/run/mps"), "--mps-root: only applies with --sharing mps, got --sharing shared"},
		{append(base, "--sharing", "exclusive", "--mps-control", "/usr/bin/nvidia-cuda-mps-control"), "--mps-control: only applies with --sharing mps, got --sharing exclusive"},
		{append(base, "--sharing", "mps", "--mps-root", "mps"), `--mps-root: must be an absolute path, got "mps"`},
		{append(base, "--sharing", "mps", "--mps-control", "/nonexistent/nvidia-cuda-mps-control"), "--mps-control: /nonexistent/nvidia-cuda-mps-control is not an executable program"},
		{append(base, "--state-dir", "rel/dir"), `--state-dir: must be an absolute path, got "rel/dir"`},
		{append(base, "--compute-fail", "maybe"), `--compute-fail: must be open or closed, got "maybe"`},
		{append(base, "--use-period", "5s"), "--use-period: must be in [10s, 30s], got 5s (0 publishes none)"},
		{append(base, "--idle-after", "10s"), "--idle-after: must be in [1m0s, 168h0m0s], got 10s"},
		{append(base, "--idle-below", "0.9"), "--idle-below: must be in [0.001, 0.500] of a GPU, got 0.900"},
		{append(base, "--idle-below", "lots"), "--idle-below: must be a GPU share such as 0.05 or 5%"},
		{append(base, "--source", "cloud"), `--source: source "cloud": must be one of auto, local, sim:SPEC, sim:FILE.yaml`},
	} {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// testAgentFlags are valid flags: the defaults tessera agent's flag set
// gives, with a node name, simulated GPUs and absolute folders.
func testAgentFlags() agentFlags {
	return agentFlags{nodeName: "n1", source: "sim:1xH100-SXM", pluginDir: "/p", stateDir: "/s", runDir: "/r", slotsPerGPU: 4, sharing: gpunode.SharingShared,
		cdiSpecDir: cdi.DefaultDir, idleBelow: quantity.FormatShare(gpuuse.DefaultIdleBelowMilli), idleAfter: gpuuse.DefaultIdleAfter, lendIdle: true}
}

// TestAgentIdleFlags: --idle-below, --idle-after and --lend-idle reach
// the agent's options (the node arbiter's idle rule), the defaults
// tessera up has.
func TestAgentIdleFlags(t *testing.T) {
	a := &app{catalog: catalog.Default()}
	f := testAgentFlags()
	o, err := f.options(a)
	if err != nil || o.Idle != (gpuuse.IdleRule{BelowMilli: 50, After: 10 * time.Minute}) || !o.LendIdle {
		t.Fatalf("defaults: idle %+v lend %v, %v; want below 0.05 for 10m, lent", o.Idle, o.LendIdle, err)
	}
	f.idleBelow, f.idleAfter, f.lendIdle = "2%", 30*time.Minute, false
	if o, err = f.options(a); err != nil || o.Idle != (gpuuse.IdleRule{BelowMilli: 20, After: 30 * time.Minute}) || o.LendIdle {
		t.Fatalf("--idle-below 2%% --idle-after 30m --lend-idle=false: idle %+v lend %v, %v", o.Idle, o.LendIdle, err)
	}
}

// TestAgentMPSOptions: --sharing mps finds nvidia-cuda-mps-control on PATH
// unless --mps-control names it, and fails naming the flag when it is
// nowhere.
func TestAgentMPSOptions(t *testing.T) {
	fakeControl := mpstest.Write(t)
	a := &app{catalog: catalog.Default()}
	f := testAgentFlags()
	f.sharing, f.mpsRoot = gpunode.SharingMPS, defaultMPSRoot

	t.Setenv("PATH", filepath.Dir(fakeControl))
	o, err := f.options(a)
	if err != nil {
		t.Fatal(err)
	}
	if o.Sharing != gpunode.SharingMPS || o.MPSRoot != defaultMPSRoot || o.MPSControl != fakeControl {
		t.Errorf("options: sharing %q root %q control %q; want mps, %s, %s", o.Sharing, o.MPSRoot, o.MPSControl, defaultMPSRoot, fakeControl)
	}

	t.Setenv("PATH", t.TempDir())
	if _, err := f.options(a); err == nil || !strings.Contains(err.Error(), "--mps-control: nvidia-cuda-mps-control is not an executable program") {
		t.Errorf("no control program on PATH: %v", err)
	}
	f.mpsControl = fakeControl
	if o, err := f.options(a); err != nil || o.MPSControl != fakeControl {
		t.Errorf("--mps-control %s: %v, %q", fakeControl, err, o.MPSControl)
	}
}

// syncBuffer is a bytes.Buffer safe for the agent's log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAgentCommandEndToEnd runs `tessera agent` on a simulated node against
// a real API server and the kubelet stand-in: it publishes the inventory,
// registers the device plugin, hands a pod its assignment and serves metrics.
func TestAgentCommandEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, c, cfg := testcluster.ForTest(t, false)
	core := kubernetes.NewForConfigOrDie(cfg)
	if _, err := core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir, kubelet, stopKubelet := startKubelet(t, "tc")
	defer stopKubelet()
	metricsAddr := freeLoopbackAddr(t)
	stderr, stopAgent := runAgent(ctx, t, "agent", agentArgs("gpu-node-0", "sim:2xH100-SXM", c.Kubeconfig, dir, metricsAddr, "--slots-per-gpu", "4"))
	defer stopAgent()
	if err := kubelet.WaitDevices(ctx, func(d map[string]string) bool { return len(d) == 8 }); err != nil {
		t.Fatalf("device plugin: %v\n%s", err, stderr.String())
	}
	devs := kubelet.Devices()
	var gpu string
	for id := range devs {
		gpu = strings.Split(id, "::")[0]
		break
	}
	a, _ := binding.Encode(binding.Assignment{Node: "gpu-node-0", Containers: []binding.Container{{Name: "main", GPUs: []binding.Share{
		{UUID: gpu, ComputeMilli: 300, ComputeLimitMilli: 600, MemoryMiB: 4096, MemoryLimitMiB: 8192}}}}})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Annotations: map[string]string{binding.AnnotationKey: a}},
		Spec: corev1.PodSpec{NodeName: "gpu-node-0", Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
			Env:       []corev1.EnvVar{{Name: simulated.LoadEnv, Value: "busy=0.5,memory=2Gi"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}}}}},
	}
	if _, err := core.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := kubelet.Admit(ctx, kubeletsim.Pod{Namespace: "default", Name: "p", Containers: []kubeletsim.Container{{Name: "main", Devices: 1}}}, kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	if env := got["main"].Envs; env["CUDA_VISIBLE_DEVICES"] != gpu || env["TESSERA_MEMORY_LIMIT"] != "8192Mi" || env["TESSERA_COMPUTE_LIMIT"] != "600m" {
		t.Errorf("env = %v", env)
	}
	if err := kubelet.Start(ctx, "default", "p"); err != nil {
		t.Errorf("start: %v", err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	eventually(ctx, t, "GPUNode published", func() error {
		_, err := dyn.Resource(gpunode.Resource()).Get(ctx, "gpu-node-0", metav1.GetOptions{})
		return err
	})
	scrapeUntil(ctx, t, "metrics served", metricsAddr, `tessera_container_gpu_memory_limit_bytes{container="main",gpu=`, `source="simulated"`)
	checkUse(ctx, t, dyn, gpu)
	checkMPSAgent(ctx, t, c.Kubeconfig, core, dyn)
	checkDRAAgent(ctx, t, c.Kubeconfig, core)
}

// checkUse: the agent publishes the node's GPUUse with the pod's booking
// beside the use its declared load runs on the simulated GPU, labelled
// simulated, and the memory it declares.
func checkUse(ctx context.Context, t *testing.T, dyn dynamic.Interface, gpu string) {
	t.Helper()
	eventually(ctx, t, "GPUUse with pod p's simulated use", func() error {
		obj, err := dyn.Resource(nodeuse.Resource()).Get(ctx, "gpu-node-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		st, err := nodeuse.FromObject(obj)
		if err != nil {
			return err
		}
		if st.Source != "sim" || !st.Rule.Metered {
			return fmt.Errorf("source %q metered %v, want sim, metered (simulated meter)", st.Source, st.Rule.Metered)
		}
		for _, g := range st.GPUs {
			if g.GPU != gpu {
				continue
			}
			if len(g.Shares) != 1 {
				return fmt.Errorf("GPU %s shares %+v, want pod p's", gpu, g.Shares)
			}
			s := g.Shares[0]
			if s.Workload != "default/p" || s.Booked.GuaranteedMilli != 300 || s.Booked.LimitMilli != 600 || s.Booked.MemoryLimitMiB != 8192 {
				return fmt.Errorf("share %+v, want default/p booked 300/600 milli, 8192 MiB cap", s)
			}
			if s.Use.Source != gpuuse.Simulated || s.Use.BusyMilli == nil || *s.Use.BusyMilli != 500 || s.Use.MemoryUsedMiB == nil || *s.Use.MemoryUsedMiB != 2048 {
				return fmt.Errorf("use %+v, want simulated 500 milli busy, 2048 MiB", s.Use)
			}
			return nil
		}
		return fmt.Errorf("GPU %s not in %+v", gpu, st.GPUs)
	})
}

// checkMPSAgent runs `tessera agent --sharing mps` (with a fake
// nvidia-cuda-mps-control) for a second node of the cluster: the API
// server stores its GPUNode with sharing mps, and a hostIPC pod's container
// gets its GPU's MPS pipe folder and caps.
func checkMPSAgent(ctx context.Context, t *testing.T, kubeconfig string, core kubernetes.Interface, dyn dynamic.Interface) {
	t.Helper()
	const node = "gpu-node-1"
	if _, err := core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir, kubelet, stopKubelet := startKubelet(t, "tm")
	defer stopKubelet()
	mpsRoot := filepath.Join(dir, "mps")
	stderr, stopAgent := runAgent(ctx, t, "MPS agent", agentArgs(node, "sim:1xH100-SXM", kubeconfig, dir, "", "--slots-per-gpu", "4",
		"--sharing", "mps", "--mps-root", mpsRoot, "--mps-control", mpstest.Write(t)))
	defer stopAgent()
	if err := kubelet.WaitDevices(ctx, func(d map[string]string) bool { return len(d) == 4 }); err != nil {
		t.Fatalf("MPS agent's device plugin: %v\n%s", err, stderr.String())
	}
	var gpu string
	for id := range kubelet.Devices() {
		gpu = strings.Split(id, "::")[0]
	}
	eventually(ctx, t, "GPUNode with sharing mps", func() error {
		obj, err := dyn.Resource(gpunode.Resource()).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		modes, err := gpunode.Sharing(obj)
		if err != nil {
			return err
		}
		if modes[gpu] != gpunode.SharingMPS {
			return fmt.Errorf("sharing = %v, want %s: mps", modes, gpu)
		}
		return nil
	})
	a, _ := binding.Encode(binding.Assignment{Node: node, Containers: []binding.Container{{Name: "main", GPUs: []binding.Share{
		{UUID: gpu, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 4096, MemoryLimitMiB: 4096}}}}})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mps", Namespace: "default", Annotations: map[string]string{binding.AnnotationKey: a}},
		Spec: corev1.PodSpec{NodeName: node, HostIPC: true, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}}}}},
	}
	if _, err := core.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := kubelet.Admit(ctx, kubeletsim.Pod{Namespace: "default", Name: "mps", Containers: []kubeletsim.Container{{Name: "main", Devices: 1}}}, kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatalf("admit on the MPS node: %v\n%s", err, stderr.String())
	}
	pipe := filepath.Join(mpsRoot, gpu, "pipe")
	if env := got["main"].Envs; env["CUDA_MPS_PIPE_DIRECTORY"] != pipe || env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != "25" || env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] != "0=4096M" {
		t.Errorf("MPS env = %v", env)
	}
	if m := got["main"]; m.Mounts[pipe] != pipe || m.ReadOnly[pipe] {
		t.Errorf("mounts = %v (read-only %v), want %s read-write", m.Mounts, m.ReadOnly, pipe)
	}
}

// startKubelet starts a simulated kubelet (plugin folder dp, pod-resources
// socket pr.sock) in a new temporary folder with a short name (unix socket
// paths are limited); stop stops it and removes the folder.
func startKubelet(t *testing.T, prefix string) (dir string, kubelet *kubeletsim.Kubelet, stop func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err = kubeletsim.Start(filepath.Join(dir, "dp"), filepath.Join(dir, "pr.sock"), kube.ResourceGPU)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	return dir, kubelet, func() {
		kubelet.Stop()
		os.RemoveAll(dir)
	}
}

func eventually(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// agentArgs are `tessera agent`'s arguments for a test node whose kubelet
// (startKubelet) lives in dir, with more appended.
func agentArgs(node, source, kubeconfig, dir, metricsAddr string, more ...string) []string {
	return append([]string{"agent", "--node-name", node, "--source", source,
		"--kubeconfig", kubeconfig, "--kubelet-socket-dir", filepath.Join(dir, "dp"),
		"--pod-resources-socket", filepath.Join(dir, "pr.sock"), "--state-dir", filepath.Join(dir, "state"),
		"--run-dir", filepath.Join(dir, "run"), "--metrics-addr", metricsAddr}, more...)
}

// runAgent runs the command args until stop is called, which fails t
// (naming what) if it did not exit 0; stderr holds what it printed.
func runAgent(ctx context.Context, t *testing.T, what string, args []string) (stderr *syncBuffer, stop func()) {
	t.Helper()
	actx, cancel := context.WithCancel(ctx)
	stderr = &syncBuffer{}
	exited := make(chan int, 1)
	go func() { exited <- Execute(actx, args, io.Discard, stderr) }()
	return stderr, func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("%s exited %d:\n%s", what, code, stderr.String())
		}
	}
}

// scrapeUntil waits until addr's /metrics holds every one of want.
func scrapeUntil(ctx context.Context, t *testing.T, what, addr string, want ...string) {
	t.Helper()
	eventually(ctx, t, what, func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				return fmt.Errorf("no %s in\n%s", w, body)
			}
		}
		return nil
	})
}
