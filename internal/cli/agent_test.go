package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
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

	"github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/internal/testcluster"
	"github.com/tessera-gpu/tessera/kube/gpunode"
)

func TestAgentFlagValidation(t *testing.T) {
	base := []string{"agent", "--node-name", "n1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--node-name", ""}, "--node-name: must be set"},
		{append(base, "--slots-per-gpu", "0"), "--slots-per-gpu: must be in [1, 1000], got 0"},
		{append(base, "--sharing", "mps"), `--sharing: must be shared or exclusive (MIG GPUs are reported as mig), got "mps"`},
		{append(base, "--state-dir", "rel/dir"), `--state-dir: must be an absolute path, got "rel/dir"`},
		{append(base, "--compute-fail", "maybe"), `--compute-fail: must be open or closed, got "maybe"`},
		{append(base, "--source", "cloud"), `--source: source "cloud": must be one of auto, local, sim:SPEC, sim:FILE.yaml`},
	} {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and %q", tc.args, code, errOut, tc.want)
		}
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
	dir, err := os.MkdirTemp("", "tc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	kubelet, err := kubeletsim.Start(filepath.Join(dir, "dp"), filepath.Join(dir, "pr.sock"), kube.ResourceGPU)
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Stop()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := lis.Addr().String()
	lis.Close()

	actx, stop := context.WithCancel(ctx)
	var stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Execute(actx, []string{"agent", "--node-name", "gpu-node-0", "--source", "sim:2xH100-SXM",
			"--kubeconfig", c.Kubeconfig, "--kubelet-socket-dir", filepath.Join(dir, "dp"),
			"--pod-resources-socket", filepath.Join(dir, "pr.sock"), "--state-dir", filepath.Join(dir, "state"),
			"--run-dir", filepath.Join(dir, "run"), "--metrics-addr", metricsAddr, "--slots-per-gpu", "4"}, io.Discard, &stderr)
	}()
	defer func() {
		stop()
		if code := <-exited; code != 0 {
			t.Errorf("agent exited %d:\n%s", code, stderr.String())
		}
	}()
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
	eventually(ctx, t, "metrics served", func() error {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		want := `tessera_container_gpu_memory_limit_bytes{container="main",gpu=`
		if !strings.Contains(string(body), want) || !strings.Contains(string(body), `source="simulated"`) {
			return fmt.Errorf("no %s in\n%s", want, body)
		}
		return nil
	})
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
