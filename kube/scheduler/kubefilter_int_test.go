package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

const hostnameKey = "kubernetes.io/hostname"

// TestKubeSchedulerConstraints: issue 36's hard-constraint rows that need
// no volume provisioner, on the real control plane with KWOK nodes, end as
// kube-scheduler v1.37.2 ends them (the table): which pods bind,
// where when the constraint decides, and the rejecting plugin's own
// message on the PodScheduled condition of a pod left pending. Each row
// has nodes of its own (label row) that its pods select; all rows run at
// once on one scheduler.
func TestKubeSchedulerConstraints(t *testing.T) {
	ctx, client := controlPlane(t)
	web := func(app string) *corev1.Affinity {
		return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: hostnameKey}}}}
	}
	q := resource.MustParse
	// Nodes: 8 CPUs, 32Gi, 110 pods unless a row says otherwise.
	for i := 1; i <= 3; i++ {
		kfNode(ctx, t, client, fmt.Sprintf("aa-%d", i), "aa", nil, nil)
		kfNode(ctx, t, client, fmt.Sprintf("af-%d", i), "af", nil, nil)
		kfNode(ctx, t, client, fmt.Sprintf("sp-%d", i), "sp", map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("z%d", i)}, nil)
	}
	kfNode(ctx, t, client, "ex-1", "ex", nil, nil)
	kfNode(ctx, t, client, "ex-2", "ex", nil, nil)
	kfNode(ctx, t, client, "hp-1", "hp", nil, nil)
	kfNode(ctx, t, client, "fp-1", "fp", nil, corev1.ResourceList{"example.com/fpga": q("1")})
	kfNode(ctx, t, client, "fp-2", "fp", nil, nil)
	kfNode(ctx, t, client, "hg-1", "hg", nil, corev1.ResourceList{"hugepages-2Mi": q("1Gi")})
	gpuLabels := map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2"}
	kfNode(ctx, t, client, "gr-1", "gr", gpuLabels, corev1.ResourceList{"rdma/hca": q("1")})
	kfNode(ctx, t, client, "gr-2", "gr", gpuLabels, nil)
	// Pods another scheduler placed: an existing pod's anti-affinity
	// against the newcomer, and the pod the affinity row follows.
	kfBoundPod(ctx, t, client, "ex-loner", "ex-1", nil, web("ex-newcomer"))
	kfBoundPod(ctx, t, client, "af-db", "af-2", map[string]string{"app": "af-db"}, nil)
	stop := startScheduler(ctx, t, client, nil, nil)
	defer stop()

	for i := 1; i <= 4; i++ {
		kfPod(ctx, t, client, fmt.Sprintf("aa-web-%d", i), "aa", map[string]string{"app": "aa-web"}, nil, func(s *corev1.PodSpec) { s.Affinity = web("aa-web") })
	}
	kfPod(ctx, t, client, "ex-newcomer", "ex", map[string]string{"app": "ex-newcomer"}, nil, nil)
	kfPod(ctx, t, client, "af-client", "af", nil, nil, func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "af-db"}}, TopologyKey: hostnameKey}}}}
	})
	for i := 1; i <= 6; i++ {
		kfPod(ctx, t, client, fmt.Sprintf("sp-%d", i), "sp", map[string]string{"app": "sp"}, nil, func(s *corev1.PodSpec) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sp"}}}}
		})
	}
	for i := 1; i <= 2; i++ {
		kfPod(ctx, t, client, fmt.Sprintf("hp-%d", i), "hp", nil, nil, func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		})
	}
	for i := 1; i <= 3; i++ {
		kfPod(ctx, t, client, fmt.Sprintf("fp-%d", i), "fp", nil, corev1.ResourceList{"example.com/fpga": q("1")}, nil)
	}
	for i := 1; i <= 2; i++ {
		kfPod(ctx, t, client, fmt.Sprintf("hg-%d", i), "hg", nil, corev1.ResourceList{"hugepages-2Mi": q("600Mi")}, nil)
	}
	for i := 1; i <= 2; i++ {
		kfPod(ctx, t, client, fmt.Sprintf("gr-%d", i), "gr", nil, corev1.ResourceList{workload.ResourceGPU: q("1"), "rdma/hca": q("1")}, func(s *corev1.PodSpec) {})
	}

	rows := []struct {
		row     string
		bound   int
		nodes   []string // the nodes the bound pods are on, sorted, when the constraint decides
		pending string   // the rejection on the pods left pending
	}{
		{"aa-web-", 3, []string{"aa-1", "aa-2", "aa-3"}, "InterPodAffinity: node(s) didn't match pod anti-affinity rules"},
		{"ex-newcomer", 1, []string{"ex-2"}, ""},
		{"af-client", 1, []string{"af-2"}, ""},
		{"sp-", 6, []string{"sp-1", "sp-1", "sp-2", "sp-2", "sp-3", "sp-3"}, ""},
		{"hp-", 1, nil, "NodePorts: node(s) didn't have free ports for the requested pod ports"},
		{"fp-", 1, []string{"fp-1"}, "NodeResourcesFit: Insufficient example.com/fpga"},
		{"hg-", 1, nil, "NodeResourcesFit: Insufficient hugepages-2Mi"},
		{"gr-", 1, []string{"gr-1"}, "NodeResourcesFit: Insufficient rdma/hca"},
	}
	for _, r := range rows {
		waitFor(t, r.row+" as kube-scheduler ends it", func() error { return rowEnds(ctx, client, r.row, r.bound, r.nodes, r.pending) })
	}
	// Pending pods are tried again (backoff); none binds later.
	for _, r := range rows {
		if err := rowEnds(ctx, client, r.row, r.bound, r.nodes, r.pending); err != nil {
			t.Error(err)
		}
	}
}

// rowEnds checks the pods named prefix*: bound of them bound, on nodes
// (sorted; nil: anywhere), and the others pending with a PodScheduled
// condition saying pending.
func rowEnds(ctx context.Context, c kubernetes.Interface, prefix string, bound int, nodes []string, pending string) error {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var on []string
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, prefix) || p.Spec.SchedulerName != DefaultName {
			continue
		}
		if p.Spec.NodeName != "" {
			on = append(on, p.Spec.NodeName)
			continue
		}
		if pending == "" {
			return fmt.Errorf("pod %s pending", p.Name)
		}
		if err := hasCondition(ctx, c, p.Name, corev1.PodReasonUnschedulable, pending); err != nil {
			return err
		}
	}
	slices.Sort(on)
	if len(on) != bound || (nodes != nil && !slices.Equal(on, nodes)) {
		return fmt.Errorf("pods %s* bound on %v, want %d (on %v)", prefix, on, bound, nodes)
	}
	return nil
}

// kfNode creates a KWOK node of row (label row; hostname label as kubelet
// sets it): 8 CPUs, 32Gi, 110 pods, plus extra allocatable.
func kfNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name, row string, labels map[string]string, extra corev1.ResourceList) {
	t.Helper()
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	maps.Copy(res, extra)
	l := map[string]string{"row": row, hostnameKey: name}
	maps.Copy(l, labels)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{testcluster.FakeNodeAnnotation: "fake"}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res}}
	if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kfPod creates a Tessera pod of row (it selects the row's nodes) asking
// 100m CPU, with limits (extended resources, hugepages and Tessera's GPU
// keys ask by their limits), edited by edit.
func kfPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name, row string, labels map[string]string, limits corev1.ResourceList, edit func(*corev1.PodSpec)) {
	t.Helper()
	spec := corev1.PodSpec{NodeSelector: map[string]string{"row": row}, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}, Limits: limits}}}}
	var ann map[string]string
	if _, gpu := limits[workload.ResourceGPU]; gpu {
		ann = map[string]string{workload.AnnotationCompute: "0.5"}
	}
	if edit != nil {
		edit(&spec)
	}
	createPodSpec(ctx, t, c, name, labels, ann, spec)
}

// kfBoundPod creates a pod another scheduler bound to node.
func kfBoundPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name, node string, labels map[string]string, aff *corev1.Affinity) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Affinity: aff, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
