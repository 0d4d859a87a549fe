package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpusummary"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// showGPUsKube runs `tessera show-gpus ARGS -o json` with the environment
// env (KUBECONFIG and the like; unset variables as ""), checks it exits 0,
// and checks the cluster's pool breakdown against want (in the report's
// order: labelled pools by name, then unlabelled ones). It returns the
// report and stderr. Tests of any cluster (KWOK nodes, a real node) can
// check show-gpus with it after placing their pods.
func showGPUsKube(t *testing.T, env map[string]string, want []gpusummary.PoolRow, args ...string) (gpusummary.Report, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	out, errOut, code := run(t, append(append([]string{"show-gpus"}, args...), "-o", "json")...)
	if code != 0 {
		t.Fatalf("show-gpus %v: exit %d\n%s", args, code, errOut)
	}
	var rep gpusummary.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("show-gpus %v: not JSON: %v\n%s", args, err, out)
	}
	if !strings.HasPrefix(rep.Source, "kube:") {
		t.Fatalf("show-gpus %v: source %q, want kube:CONTEXT", args, rep.Source)
	}
	if len(rep.Pools) != len(want) {
		t.Fatalf("show-gpus %v: pools\n%+v\nwant\n%+v", args, rep.Pools, want)
	}
	for i := range want {
		if rep.Pools[i] != want[i] {
			t.Errorf("show-gpus %v: pools[%d] = %+v, want %+v", args, i, rep.Pools[i], want[i])
		}
	}
	return rep, errOut
}

// showGPUsNode creates a KWOK node with labels and its GPUNode object, as the
// agent publishes it, with count GPUs of model.
func showGPUsNode(ctx context.Context, t *testing.T, core kubernetes.Interface, dyn dynamic.Interface, name, model string, count int, labels map[string]string) {
	t.Helper()
	if err := testcluster.CreateGPUNode(ctx, core, dyn, testcluster.GPUNode{Name: name, Model: model, Count: count, Labels: labels}); err != nil {
		t.Fatal(err)
	}
}

// bindShare creates a Tessera pod asking for fraction of a GPU and binds it
// to GPU index gpu of node with its assignment, as the scheduler binds.
func bindShare(ctx context.Context, t *testing.T, core kubernetes.Interface, name, node string, gpu int, fraction string, milli int64) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{workload.AnnotationCompute: fraction}},
		Spec: corev1.PodSpec{SchedulerName: "tessera", Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}}}
	p, err := core.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := binding.Encode(binding.Assignment{Version: binding.Version, Node: node, Containers: []binding.Container{{Name: "main",
		GPUs: []binding.Share{{UUID: fmt.Sprintf("GPU-%s-%d", node, gpu), Index: gpu, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: 1024, MemoryLimitMiB: 1024}}}}})
	if err != nil {
		t.Fatal(err)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: p.UID, Annotations: map[string]string{binding.AnnotationKey: enc}},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := core.CoreV1().Pods("default").Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeconfigFile writes a kubeconfig of one context (server, token, an
// optional user to impersonate) and returns its path.
func kubeconfigFile(t *testing.T, dir, file, ctxName, server, token, as string) string {
	t.Helper()
	user := fmt.Sprintf("    token: %q\n", token)
	if as != "" {
		user += fmt.Sprintf("    as: %q\n", as)
	}
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    insecure-skip-tls-verify: true
users:
- name: %[1]s
  user:
%[3]scontexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s
current-context: %[1]s
`, ctxName, server, user)
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func TestShowGPUsKube(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, c, cfg := testcluster.ForTest(t, true)
	core := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // never the in-cluster config
	t.Setenv("KUBECONFIG", missing)         // nothing from the developer's own kubeconfig
	fail := func(wantCode int, want []string, args ...string) {
		t.Helper()
		_, errOut, code := run(t, append([]string{"show-gpus"}, args...)...)
		for _, w := range want {
			if code != wantCode || !strings.Contains(errOut, w) {
				t.Errorf("show-gpus %v: exit %d, stderr %q; want exit %d and %q", args, code, errOut, wantCode, w)
			}
		}
	}

	// No GPUNode CRD yet: say how to install it.
	fail(1, []string{`--source kube (context "tessera-test"): the cluster does not serve GPUNode objects`, "Tessera's CRDs are not installed at " + c.Host, "kubectl apply -f deploy/crds/"},
		"--source", "kube", "--kubeconfig", c.Kubeconfig)
	// And auto does not choose a cluster without Tessera, saying why.
	_, errOut, code := run(t, "show-gpus", "--source", "auto", "--kubeconfig", c.Kubeconfig)
	if code != 0 || !strings.Contains(errOut, "note: --source auto: no Kubernetes cluster to read (") || !strings.Contains(errOut, "CRDs are not installed") {
		t.Errorf("auto without the CRD: exit %d\n%s", code, errOut)
	}

	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	showGPUsNode(ctx, t, core, dyn, "train-1", "H200", 2, map[string]string{"tessera.io/pool": "train", "team": "research"})
	showGPUsNode(ctx, t, core, dyn, "train-2", "H200", 2, map[string]string{"tessera.io/pool": "train", "team": "research"})
	showGPUsNode(ctx, t, core, dyn, "infer-1", "L4", 2, map[string]string{"tessera.io/pool": "infer"})
	showGPUsNode(ctx, t, core, dyn, "spare-1", "H200", 1, nil)
	bindShare(ctx, t, core, "whole", "train-1", 0, "1", 1000)
	bindShare(ctx, t, core, "half", "train-2", 1, "0.5", 500)
	bindShare(ctx, t, core, "quarter", "infer-1", 0, "0.25", 250)
	bindShare(ctx, t, core, "quarter-2", "infer-1", 0, "0.25", 250)

	// KWOK runs the bound pods: they are counted Running, as on a real node.
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := core.CoreV1().Pods("default").Get(ctx, "half", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod half not Running: %v %+v", err, p.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}

	byPool := []gpusummary.PoolRow{
		{Pool: "infer", Labeled: true, Model: "L4", Nodes: 1, Total: 2, Free: 1, FreeCapacity: 1.5},
		{Pool: "train", Labeled: true, Model: "H200", Nodes: 2, Total: 4, Free: 2, FreeCapacity: 2.5},
		{Pool: "H200", Labeled: false, Model: "H200", Nodes: 1, Total: 1, Free: 1, FreeCapacity: 1},
	}
	t.Run("kubeconfig flag", func(t *testing.T) {
		rep, _ := showGPUsKube(t, nil, byPool, "--source", "kube", "--kubeconfig", c.Kubeconfig)
		if rep.Source != "kube:tessera-test" || rep.PoolLabel != "tessera.io/pool" {
			t.Errorf("report header: source %q pool label %q", rep.Source, rep.PoolLabel)
		}
		for _, r := range rep.Rows {
			if r.Model == "H200" && (*r.Total != 5 || *r.Free != 3 || *r.FreeCapacity != 3.5) {
				t.Errorf("H200 row: total %d free %d capacity %v; want 5 3 3.5", *r.Total, *r.Free, *r.FreeCapacity)
			}
		}
	})
	t.Run("table", func(t *testing.T) {
		out, errOut, code := run(t, "show-gpus", "--source", "kube", "--kubeconfig", c.Kubeconfig)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		t.Logf("show-gpus --source kube:\n%s", out)
		for _, want := range []string{"Node pools (label tessera.io/pool; nodes without it are pooled by GPU model):",
			"POOL", "FREE CAPACITY", "H200 (no label)", "Inventory: kube:tessera-test"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q:\n%s", want, out)
			}
		}
		fields := func(prefix string) string {
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, prefix) {
					return strings.Join(strings.Fields(l), " ")
				}
			}
			return ""
		}
		if got := fields("train "); got != "train H200 2 4 2 2.5" {
			t.Errorf("train row %q\n%s", got, out)
		}
		if got := fields("infer "); got != "infer L4 1 2 1 1.5" {
			t.Errorf("infer row %q\n%s", got, out)
		}
	})
	t.Run("pool label", func(t *testing.T) {
		showGPUsKube(t, nil, []gpusummary.PoolRow{
			{Pool: "research", Labeled: true, Model: "H200", Nodes: 2, Total: 4, Free: 2, FreeCapacity: 2.5},
			{Pool: "H200", Labeled: false, Model: "H200", Nodes: 1, Total: 1, Free: 1, FreeCapacity: 1},
			{Pool: "L4", Labeled: false, Model: "L4", Nodes: 1, Total: 2, Free: 1, FreeCapacity: 1.5},
		}, "--source", "kube", "--kubeconfig", c.Kubeconfig, "--pool-label", "team")
	})
	// KUBECONFIG is a list merged as kubectl merges it: the first file's
	// current-context wins, every file's contexts can be chosen.
	elsewhere := kubeconfigFile(t, dir, "elsewhere", "elsewhere", "https://"+closedPort(t), "x", "")
	t.Run("KUBECONFIG", func(t *testing.T) {
		showGPUsKube(t, map[string]string{"KUBECONFIG": strings.Join([]string{missing, c.Kubeconfig, elsewhere}, string(os.PathListSeparator))},
			byPool, "--source", "kube")
	})
	t.Run("KUBECONFIG and --context", func(t *testing.T) {
		rep, _ := showGPUsKube(t, map[string]string{"KUBECONFIG": strings.Join([]string{elsewhere, c.Kubeconfig}, string(os.PathListSeparator))},
			byPool, "--source", "kube", "--context", "tessera-test")
		if rep.Source != "kube:tessera-test" {
			t.Errorf("source %q", rep.Source)
		}
	})
	t.Run("auto chooses the cluster", func(t *testing.T) {
		_, errOut := showGPUsKube(t, map[string]string{"KUBECONFIG": c.Kubeconfig}, byPool, "--source", "auto")
		if want := `note: --source auto: reading the Kubernetes cluster (context "tessera-test", server ` + c.Host + ")"; !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	})
	t.Run("auto falls back", func(t *testing.T) {
		t.Setenv("KUBECONFIG", elsewhere)
		out, errOut, code := run(t, "show-gpus", "--source", "auto")
		if code != 0 || !strings.Contains(errOut, "note: --source auto: no Kubernetes cluster to read (cluster unreachable") ||
			strings.Contains(out, "Inventory: kube:") {
			t.Errorf("exit %d\n%s\n%s", code, out, errOut)
		}
	})

	// Errors, each naming what to fix.
	t.Run("no kubeconfig", func(t *testing.T) {
		fail(1, []string{"no kubeconfig found (looked at $KUBECONFIG=" + missing}, "--source", "kube")
	})
	t.Run("unknown context", func(t *testing.T) {
		t.Setenv("KUBECONFIG", strings.Join([]string{c.Kubeconfig, elsewhere}, string(os.PathListSeparator)))
		fail(1, []string{`--context "prod": no such context`, "available: elsewhere, tessera-test"}, "--source", "kube", "--context", "prod")
	})
	t.Run("unreachable", func(t *testing.T) {
		fail(1, []string{"cluster unreachable: the API server at https://127.0.0.1:", "connection refused"}, "--source", "kube", "--kubeconfig", elsewhere)
	})
	t.Run("RBAC denied", func(t *testing.T) {
		// The admin impersonates a user who may list nodes only.
		viewer := kubeconfigFile(t, dir, "viewer", "viewer", c.Host, c.Token, "viewer")
		fail(1, []string{"RBAC denied: cannot list nodes on " + c.Host, `User "viewer" cannot list resource "nodes"`}, "--source", "kube", "--kubeconfig", viewer)
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-viewer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}}
		if _, err := core.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "node-viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "node-viewer"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "viewer"}}}
		if _, err := core.RbacV1().ClusterRoleBindings().Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// RBAC changes take effect asynchronously; the bound is a liveness guard.
		deadline := time.Now().Add(60 * time.Second)
		for {
			_, errOut, _ := run(t, "show-gpus", "--source", "kube", "--kubeconfig", viewer)
			if strings.Contains(errOut, "RBAC denied: cannot list gpunodes.tessera.io") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after granting list nodes: %s", errOut)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	t.Run("use", func(t *testing.T) { testShowGPUsKubeUse(ctx, t, dyn, c.Kubeconfig) })
}

// testShowGPUsKubeUse: with the GPUUse CRD, show-gpus --source kube adds
// the use the agents published beside the booking: train-1's fresh
// simulated figure, labelled simulated; train-2's publication too old,
// infer-1 and spare-1 publishing none, each not metered.
func testShowGPUsKubeUse(ctx context.Context, t *testing.T, dyn dynamic.Interface, kubeconfig string) {
	if _, errOut, _ := run(t, "show-gpus", "--source", "kube", "--kubeconfig", kubeconfig); !strings.Contains(errOut, "note: no USED column: the cluster does not serve GPUUse objects") {
		t.Errorf("without the GPUUse CRD, stderr %q lacks the note", errOut)
	}
	if err := nodeuse.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	busy, mem := int64(600), int64(20480)
	publish := func(node string, at time.Time, gpus ...gpuuse.GPU) {
		obj, err := nodeuse.Object(node, nodeuse.Status{Source: "sim", At: at, GPUs: gpus})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(nodeuse.Resource()).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	held := gpuuse.GPU{GPU: "GPU-train-1-0", Shares: []gpuuse.Share{{Workload: "default/whole", GPU: "GPU-train-1-0",
		Booked: gpuuse.Booked{GuaranteedMilli: 1000, LimitMilli: 1000, MemoryMiB: 1024, MemoryLimitMiB: 1024},
		Use:    gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: &busy, MemoryUsedMiB: &mem, From: time.Now().Add(-10 * time.Second), At: time.Now()}}}}
	held.Sum("no pod holds it")
	bare := gpuuse.GPU{GPU: "GPU-train-1-1", Index: 1}
	bare.Sum("no pod holds it")
	publish("train-1", time.Now(), held, bare)
	publish("train-2", time.Now().Add(-10*time.Minute), held)
	out, errOut, code := run(t, "show-gpus", "--source", "kube", "--kubeconfig", kubeconfig, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep gpusummary.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.WithUse {
		t.Fatalf("report without use:\n%s", out)
	}
	reasons := map[string]string{}
	for _, r := range rep.Rows {
		if r.Model != "H200" {
			continue
		}
		u := r.Use
		if u == nil || u.Simulated == nil || u.Measured != nil || u.Simulated.GPUs != 1 || *u.Simulated.Busy != 0.6 || *u.Simulated.MemoryUsedMiB != 20480 || u.NotMetered != 4 {
			t.Errorf("H200 use = %+v, want 0.6 simulated (20480 MiB) on one GPU, never measured, and 4 not metered", u)
		}
		for _, g := range r.GPUs {
			reasons[g.UUID] = g.Use.Reason
		}
	}
	for uuid, want := range map[string]string{
		"GPU-train-1-0": "",
		"GPU-train-1-1": "not metered: no pod holds it",
		"GPU-train-2-0": "not metered: the node's agent last published use 10m",
		"GPU-spare-1-0": "not metered: the node's agent publishes no use (no GPUUse spare-1)",
	} {
		if got, ok := reasons[uuid]; !ok || !strings.HasPrefix(got, want) {
			t.Errorf("%s: reason %q, want %q", uuid, got, want)
		}
	}
	table, _, _ := run(t, "show-gpus", "--source", "kube", "--kubeconfig", kubeconfig)
	t.Logf("show-gpus --source kube with use:\n%s", table)
	if !strings.Contains(table, "USED") || !strings.Contains(table, "0.6 simulated (20 GiB) + 4 not metered") {
		t.Errorf("table lacks the H200 row's use:\n%s", table)
	}
}
