package e2enode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	schedulerName = "tessera"
	interceptLib  = "/usr/local/lib/tessera/libtessera-intercept.so"
)

// TestRealNode runs Tessera from its image and the chart's manifests on a
// real kubelet with one simulated H200, and checks what containers get,
// through each fault the issue lists. Steps build on each other: a failed
// one ends the test.
func TestRealNode(t *testing.T) {
	n := startNode(t, "1xH200")
	gpu := n.gpuUUIDs()
	if len(gpu) != 1 {
		t.Fatalf("GPUNode lists %d GPUs, want 1 (sim:1xH200)", len(gpu))
	}
	steps := []struct {
		name string
		run  func(t *testing.T, n *node, uuid string)
	}{
		{"two halves share one GPU", twoHalvesShare},
		{"a third half waits until one leaves", thirdHalfWaits},
		{"migrated pods get the same handoff", migratedPods},
		{"kubelet restart", kubeletRestart},
		{"agent pod deleted", agentPodDeleted},
		{"deleting every pod frees every share", allFreed},
		{"a GPU pod's claim is mounted", claimMounted},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, n.with(t), gpu[0]) }) {
			return
		}
	}
}

// with returns n reporting to t (a subtest).
func (n *node) with(t *testing.T) *node {
	m := *n
	m.t = t
	return &m
}

// gpuUUIDs lists the GPUs the agent published in the node's GPUNode.
func (n *node) gpuUUIDs() []string {
	n.t.Helper()
	gpunodes := schema.GroupVersionResource{Group: "tessera.io", Version: "v1alpha1", Resource: "gpunodes"}
	u, err := n.dyn.Resource(gpunodes).Get(n.ctx, n.rn.Name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatalf("GPUNode %s: %v", n.rn.Name, err)
	}
	var out []string
	gpus, _ := u.Object["status"].(map[string]any)["gpus"].([]any)
	for _, g := range gpus {
		out = append(out, g.(map[string]any)["uuid"].(string))
	}
	return out
}

// podSpec is a probe pod for Tessera with the given annotations and limits.
func (n *node) podSpec(name string, annotations map[string]string, limits corev1.ResourceList) *corev1.Pod {
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations, Labels: map[string]string{"e2e": "probe"}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			// The real node, not the KWOK one beside it.
			NodeSelector: map[string]string{"kubernetes.io/hostname": n.rn.Name},
			// No pod network on the test node (loopback CNI).
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "main", Image: n.probe, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Limits: limits},
			}},
		},
	}
}

func half(n *node, name string) *corev1.Pod {
	return n.podSpec(name, map[string]string{"tessera.io/gpu-fraction": "0.5"},
		corev1.ResourceList{"tessera.io/gpu": resource.MustParse("1")})
}

func (n *node) create(p *corev1.Pod) {
	n.t.Helper()
	if _, err := n.cs.CoreV1().Pods(p.Namespace).Create(n.ctx, p, metav1.CreateOptions{}); err != nil {
		n.t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

func (n *node) deletePod(name string) {
	n.t.Helper()
	if err := n.cs.CoreV1().Pods("default").Delete(n.ctx, name, metav1.DeleteOptions{}); err != nil {
		n.t.Fatalf("delete pod %s: %v", name, err)
	}
	n.eventually(2*time.Minute, "pod "+name+" gone", func() error {
		_, err := n.cs.CoreV1().Pods("default").Get(n.ctx, name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// running waits until the pod runs and its probe printed what it got, and
// returns those variables.
func (n *node) running(name string) map[string]string {
	n.t.Helper()
	var env map[string]string
	n.eventually(3*time.Minute, "pod "+name+" runs its probe", func() error {
		p, err := n.cs.CoreV1().Pods("default").Get(n.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("%s", podState(p))
		}
		log := n.logs(n.ctx, "default", name, "main", 0)
		if !strings.Contains(log, "probe.ready=1") {
			return fmt.Errorf("probe has not printed yet: %q", log)
		}
		env = parseProbe(log)
		return nil
	})
	return env
}

func parseProbe(log string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// checkHandoff checks a probe's variables: one GPU with the given compute
// guarantee, and the interception library preloaded from a file that
// exists in the container (installed on the host by the agent's init
// container and mounted by the device plugin).
func checkHandoff(t *testing.T, name string, env map[string]string, uuid, compute string) {
	t.Helper()
	want := map[string]string{
		"CUDA_VISIBLE_DEVICES":    uuid,
		"TESSERA_GPU_UUIDS":       uuid,
		"TESSERA_COMPUTE_REQUEST": compute,
		"LD_PRELOAD":              interceptLib,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("pod %s: %s=%q, want %q (all: %v)", name, k, env[k], v, env)
		}
	}
	for _, k := range []string{"TESSERA_COMPUTE_LIMIT", "TESSERA_MEMORY_REQUEST", "TESSERA_MEMORY_LIMIT"} {
		if env[k] == "" {
			t.Errorf("pod %s: %s not set (all: %v)", name, k, env)
		}
	}
	if !strings.HasPrefix(env["probe.preload"], "exists ") {
		t.Errorf("pod %s: LD_PRELOAD %s inside the container: %s", name, env["LD_PRELOAD"], env["probe.preload"])
	}
}

func twoHalvesShare(t *testing.T, n *node, uuid string) {
	n.create(half(n, "half-a"))
	n.create(half(n, "half-b"))
	for _, name := range []string{"half-a", "half-b"} {
		checkHandoff(t, name, n.running(name), uuid, "500m")
	}
	// show-gpus over the cluster: the real node's GPU is full, the KWOK
	// node's two are free.
	n.showGPUs(map[string]poolRow{
		"real": {Model: "H200", Nodes: 1, Total: 1, Free: 0, FreeCapacity: 0},
		"kwok": {Model: "A100-80GB", Nodes: 1, Total: 2, Free: 2, FreeCapacity: 2},
	})
}

// poolRow is what show-gpus -o json reports per node pool.
type poolRow struct {
	Pool         string  `json:"pool"`
	Model        string  `json:"model"`
	Nodes        int     `json:"nodes"`
	Total        int     `json:"total"`
	Free         int     `json:"free"`
	FreeCapacity float64 `json:"freeCapacity"`
}

// showGPUs runs the tessera binary `make image` built, `show-gpus --source
// kube` against this cluster, and checks its pools.
func (n *node) showGPUs(want map[string]poolRow) {
	n.t.Helper()
	bin := filepath.Join(repoRoot(n.t), "bin", "tessera")
	out, err := exec.CommandContext(n.ctx, bin, "show-gpus", "--source", "kube", "--kubeconfig", n.c.Kubeconfig, "-o", "json").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		n.t.Fatalf("tessera show-gpus --source kube: %v\n%s", err, stderr)
	}
	var rep struct {
		Source string    `json:"source"`
		Pools  []poolRow `json:"pools"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		n.t.Fatalf("show-gpus -o json: %v\n%s", err, out)
	}
	got := map[string]poolRow{}
	for _, p := range rep.Pools {
		got[p.Pool] = p
	}
	for pool, row := range want {
		row.Pool = pool
		want[pool] = row
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		n.t.Errorf("show-gpus --source kube pools:\n got %+v\nwant %+v\n%s", got, want, out)
	}
}

func thirdHalfWaits(t *testing.T, n *node, uuid string) {
	n.create(half(n, "half-c"))
	n.eventually(time.Minute, "half-c unschedulable with a reason", func() error {
		p, err := n.cs.CoreV1().Pods("default").Get(n.ctx, "half-c", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message != "" {
				t.Logf("half-c waits: %s", c.Message)
				return nil
			}
		}
		return fmt.Errorf("no PodScheduled=False condition yet: %s", podState(p))
	})
	n.deletePod("half-a")
	checkHandoff(t, "half-c", n.running("half-c"), uuid, "500m")
	n.deletePod("half-b")
	n.deletePod("half-c")
}

// migratedPods: pods written for NVIDIA's device plugin, KAI-Scheduler and
// HAMi go through the admission webhook (in the cluster, with the chart's
// certificate) and get Tessera's handoff.
func migratedPods(t *testing.T, n *node, uuid string) {
	whole := n.podSpec("nvidia-whole", nil, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")})
	n.create(whole)
	checkHandoff(t, "nvidia-whole", n.running("nvidia-whole"), uuid, "1000m")
	n.deletePod("nvidia-whole")

	kai := n.podSpec("kai-half", map[string]string{"gpu-fraction": "0.5"}, nil)
	hami := n.podSpec("hami-30", nil, corev1.ResourceList{
		"nvidia.com/gpu": resource.MustParse("1"), "nvidia.com/gpumem": resource.MustParse("20000"), "nvidia.com/gpucores": resource.MustParse("30")})
	n.create(kai)
	n.create(hami)
	checkHandoff(t, "kai-half", n.running("kai-half"), uuid, "500m")
	checkHandoff(t, "hami-30", n.running("hami-30"), uuid, "300m")
	for _, name := range []string{"kai-half", "hami-30"} {
		p, err := n.cs.CoreV1().Pods("default").Get(n.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Annotations["tessera.io/migrated-from"] == "" {
			t.Errorf("pod %s: no tessera.io/migrated-from annotation: the webhook did not translate it (annotations %v)", name, p.Annotations)
		}
	}
	n.deletePod("kai-half")
	n.deletePod("hami-30")
}

// kubeletRestart: the device plugin registers again, running containers
// are untouched, and no share is handed out twice.
func kubeletRestart(t *testing.T, n *node, uuid string) {
	n.create(half(n, "before-a"))
	n.create(half(n, "before-b"))
	n.running("before-a")
	n.running("before-b")
	ids := n.containerIDs("before-a", "before-b")
	if err := n.rn.RestartKubelet(n.ctx, n.c); err != nil {
		t.Fatalf("restart kubelet: %v", err)
	}
	n.eventually(2*time.Minute, "tessera.io/gpu allocatable again after the restart", func() error {
		nd, err := n.cs.CoreV1().Nodes().Get(n.ctx, n.rn.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q := nd.Status.Allocatable["tessera.io/gpu"]; q.IsZero() {
			return fmt.Errorf("allocatable tessera.io/gpu is %s", q.String())
		}
		return nil
	})
	if got := n.containerIDs("before-a", "before-b"); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("containers changed across the kubelet restart: %v, then %v", ids, got)
	}
	// The GPU is full: a new half must wait, not be handed a share twice.
	n.create(half(n, "after"))
	n.stillPending("after", 15*time.Second)
	n.deletePod("before-a")
	checkHandoff(t, "after", n.running("after"), uuid, "500m")
}

// containerIDs returns each pod's container ID and restart count.
func (n *node) containerIDs(names ...string) []string {
	n.t.Helper()
	var out []string
	for _, name := range names {
		p, err := n.cs.CoreV1().Pods("default").Get(n.ctx, name, metav1.GetOptions{})
		if err != nil {
			n.t.Fatal(err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			out = append(out, fmt.Sprintf("%s:%s:%d", name, cs.ContainerID, cs.RestartCount))
		}
	}
	return out
}

// stillPending checks that a pod has not run for the given time (it waits
// for room: a share handed out twice would let it run).
func (n *node) stillPending(name string, d time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p, err := n.cs.CoreV1().Pods("default").Get(n.ctx, name, metav1.GetOptions{})
		if err != nil {
			n.t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			n.t.Fatalf("pod %s was bound to %s while the GPU was full: %s", name, p.Spec.NodeName, podState(p))
		}
		time.Sleep(time.Second)
	}
}

// agentPodDeleted: the DaemonSet brings the agent back, and what it
// recovers agrees with the pods still running.
func agentPodDeleted(t *testing.T, n *node, uuid string) {
	old := n.waitPods("tessera-system", componentSelector("agent"), 1, "ready", podReady)[0]
	if err := n.cs.CoreV1().Pods("tessera-system").Delete(n.ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the agent pod: %v", err)
	}
	n.waitPods("tessera-system", componentSelector("agent"), 1, "ready (a new pod)", func(p *corev1.Pod) bool {
		return p.UID != old.UID && podReady(p)
	})
	// before-b and after hold the GPU: the agent's metrics say so, and a
	// new half still waits.
	n.eventually(time.Minute, "the new agent reports the GPU fully guaranteed", func() error {
		return n.metricEquals("tessera_gpu_compute_guaranteed_ratio", uuid, 1)
	})
	n.create(half(n, "after-agent"))
	n.stillPending("after-agent", 10*time.Second)
	n.deletePod("after")
	checkHandoff(t, "after-agent", n.running("after-agent"), uuid, "500m")
}

func allFreed(t *testing.T, n *node, uuid string) {
	for _, name := range []string{"before-b", "after-agent"} {
		n.deletePod(name)
	}
	n.eventually(time.Minute, "the agent reports nothing guaranteed", func() error {
		return n.metricEquals("tessera_gpu_compute_guaranteed_ratio", uuid, 0)
	})
	// A whole-GPU pod fits again: nothing is left booked anywhere.
	n.showGPUs(map[string]poolRow{
		"real": {Model: "H200", Nodes: 1, Total: 1, Free: 1, FreeCapacity: 1},
		"kwok": {Model: "A100-80GB", Nodes: 1, Total: 2, Free: 2, FreeCapacity: 2},
	})
	n.create(n.podSpec("whole-after", nil, corev1.ResourceList{"tessera.io/gpu": resource.MustParse("1")}))
	checkHandoff(t, "whole-after", n.running("whole-after"), uuid, "1000m")
	n.deletePod("whole-after")
}

// metricEquals scrapes the agent's /metrics (on the host network) and
// checks one GPU's sample.
func (n *node) metricEquals(name, uuid string, want float64) error {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:9400/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, `uuid="`+uuid+`"`) {
			var v float64
			f := strings.Fields(line)
			if _, err := fmt.Sscan(f[len(f)-1], &v); err != nil {
				return fmt.Errorf("%s: %w", line, err)
			}
			if v != want {
				return fmt.Errorf("%s, want %v", line, want)
			}
			return nil
		}
	}
	return fmt.Errorf("no %s sample for %s", name, uuid)
}
