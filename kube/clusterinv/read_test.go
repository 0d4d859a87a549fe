package clusterinv

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

func gpuNodeObject(name string, gpus int) runtime.Object {
	n := inventory.Node{Name: name, Source: "sim"}
	for i := 0; i < gpus; i++ {
		n.GPUs = append(n.GPUs, inventory.GPU{UUID: name + "-gpu" + string(rune('0'+i)), Index: i, Model: "H200", Product: "NVIDIA H200",
			Vendor: "NVIDIA", MemoryMiB: 143771, NUMANode: -1, Health: inventory.Healthy, MIGMode: inventory.MIGDisabled})
	}
	return gpunode.Object(n, 8, gpunode.SharingShared)
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func boundPod(name, node string, phase corev1.PodPhase, shares map[string]int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	if shares != nil {
		var gs []binding.Share
		for uuid, m := range shares {
			gs = append(gs, binding.Share{UUID: uuid, ComputeMilli: m, ComputeLimitMilli: m, MemoryMiB: 1024, MemoryLimitMiB: 1024})
		}
		enc, err := binding.Encode(binding.Assignment{Version: binding.Version, Node: node, Containers: []binding.Container{{Name: "main", GPUs: gs}}})
		if err != nil {
			panic(err)
		}
		p.Annotations = map[string]string{binding.AnnotationKey: enc}
	}
	return p
}

func reader(objs []runtime.Object, gpuNodes ...runtime.Object) (Reader, *fake.Clientset, *dynfake.FakeDynamicClient) {
	client := fake.NewClientset(objs...)
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gpunode.Resource(): "GPUNodeList", nodeuse.Resource(): "GPUUseList"}, gpuNodes...)
	return Reader{Client: client, Dynamic: dyn, Server: "https://k8s.example:6443"}, client, dyn
}

func TestReadBooksBoundPods(t *testing.T) {
	bad := boundPod("bad", "a", corev1.PodRunning, nil)
	bad.Annotations = map[string]string{binding.AnnotationKey: "{"}
	r, _, _ := reader([]runtime.Object{
		node("a", map[string]string{DefaultPoolLabel: "train"}),
		node("b", map[string]string{"team": "infer"}),
		node("cpu", nil),
		boundPod("half", "a", corev1.PodRunning, map[string]int64{"a-gpu0": 500}),
		boundPod("quarter", "a", corev1.PodPending, map[string]int64{"a-gpu0": 250}),
		boundPod("whole", "b", corev1.PodRunning, map[string]int64{"b-gpu1": 1000}),
		boundPod("over", "b", corev1.PodRunning, map[string]int64{"b-gpu1": 600}), // inconsistent: saturates
		boundPod("done", "a", corev1.PodSucceeded, map[string]int64{"a-gpu1": 1000}),
		boundPod("stranger", "a", corev1.PodRunning, map[string]int64{"x-gpu9": 100}),
		bad,
	}, gpuNodeObject("b", 2), gpuNodeObject("a", 2), gpuNodeObject("gone", 1))
	tests := []struct {
		label string
		pools map[string]string
	}{
		{"", map[string]string{"a": "train", "b": ""}},
		{"team", map[string]string{"a": "", "b": "infer"}},
	}
	for _, tc := range tests {
		r.PoolLabel = tc.label
		inv, err := r.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(inv.Nodes) != 2 || inv.Nodes[0].Name != "a" || inv.Nodes[1].Name != "b" {
			t.Fatalf("nodes = %+v", inv.Nodes)
		}
		alloc := func(n, g int) int64 { return inv.Nodes[n].GPUs[g].AllocatedMilli }
		if alloc(0, 0) != 750 || alloc(0, 1) != 0 || alloc(1, 0) != 0 || alloc(1, 1) != 1000 {
			t.Errorf("allocated: a %d %d, b %d %d; want 750 0 0 1000", alloc(0, 0), alloc(0, 1), alloc(1, 0), alloc(1, 1))
		}
		for n, want := range tc.pools {
			if got, ok := inv.Pools[n]; !ok || got != want {
				t.Errorf("label %q: pool of %s = %q, want %q", tc.label, n, got, want)
			}
		}
		warn := strings.Join(inv.Warnings, "\n")
		for _, want := range []string{
			"GPUNode gone: no Node of that name; not counted",
			"pod team/bad: annotation tessera.io/assignment",
			"node a: 1 pod(s) hold GPU x-gpu9, which its GPUNode does not report",
		} {
			if !strings.Contains(warn, want) {
				t.Errorf("warnings lack %q:\n%s", want, warn)
			}
		}
	}
}

func TestReadMalformedGPUNode(t *testing.T) {
	broken := gpuNodeObject("a", 1)
	u := broken.(interface{ UnstructuredContent() map[string]any }).UnstructuredContent()
	u["status"].(map[string]any)["gpus"].([]any)[0].(map[string]any)["sharing"] = "timeslice"
	r, _, _ := reader([]runtime.Object{node("a", nil)}, broken)
	inv, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Nodes) != 0 || len(inv.Warnings) != 1 || !strings.Contains(inv.Warnings[0], `status.gpus[0].sharing: must be one of`) {
		t.Errorf("malformed GPUNode: nodes %+v warnings %q", inv.Nodes, inv.Warnings)
	}
}

func TestReadErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "tessera.io", Resource: "gpunodes"}
	tests := []struct {
		name     string
		resource string // the fake's resource name
		dynamic  bool
		err      error
		want     []string
		is       error
	}{
		{"no CRD", "gpunodes", true, apierrors.NewNotFound(gr, ""), []string{"Tessera's CRDs are not installed at https://k8s.example:6443", "kubectl apply -f deploy/crds/"}, ErrNoGPUNodes},
		{"RBAC gpunodes", "gpunodes", true, apierrors.NewForbidden(gr, "", errors.New(`User "viewer" cannot list resource "gpunodes"`)),
			[]string{"RBAC denied: cannot list gpunodes.tessera.io on https://k8s.example:6443", `User "viewer" cannot list resource "gpunodes"`}, nil},
		{"RBAC pods", "pods", false, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no")),
			[]string{"RBAC denied: cannot list pods (all namespaces)"}, nil},
		{"RBAC nodes", "nodes", false, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no")),
			[]string{"RBAC denied: cannot list nodes"}, nil},
		{"unauthorized", "nodes", false, apierrors.NewUnauthorized("bad token"), []string{"refused the kubeconfig's credentials"}, nil},
	}
	for _, tc := range tests {
		r, client, dyn := reader([]runtime.Object{node("a", nil)}, gpuNodeObject("a", 1))
		react := func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err }
		if tc.dynamic {
			dyn.PrependReactor("list", tc.resource, react)
		} else {
			client.PrependReactor("list", tc.resource, react)
		}
		_, err := r.Read(context.Background())
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, want)
			}
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: err %v is not %v", tc.name, err, tc.is)
		}
	}
}

func TestCheckPoolLabel(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"tessera.io/pool", true}, {"cloud.google.com/gke-nodepool", true}, {"pool", true},
		{"", false}, {"bad key", false}, {"a/b/c", false}, {"-x", false},
	} {
		if err := CheckPoolLabel(tc.key); (err == nil) != tc.ok {
			t.Errorf("CheckPoolLabel(%q) = %v", tc.key, err)
		}
	}
}
