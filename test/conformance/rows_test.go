package conformance

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// compare says how much of a row's outcome its constraint decides.
type compare int

const (
	// byPod: each pod's node, or pending: the constraint decides which
	// pod binds where.
	byPod compare = iota
	// byNodes: the nodes of the bound pods, counted: which of alike pods
	// binds is the scheduler's choice.
	byNodes
	// byCount: how many pods bind: where is the scheduler's choice too.
	byCount
)

// node is one KWOK node of a row: 8 CPUs, 32Gi and 110 pods unless alloc
// says otherwise, labelled with its row and hostname.
type node struct {
	name          string
	labels        map[string]string
	alloc         corev1.ResourceList
	taints        []corev1.Taint
	unschedulable bool
	// gpus: H100s, published as the node labels Tessera reads without a
	// GPUNode (nodeinventory.LabelModel, LabelCount).
	gpus int
	// attachLimit: how many volumes of the test CSI driver the node
	// attaches (its CSINode's allocatable count); 0: no CSINode.
	attachLimit int32
}

// row is one constraint: its nodes (no other row's pods select them), the
// pods another scheduler bound before either run (kept for both), and the
// pods each run schedules, with the volumes and claims they use: those are
// made again for each run, before its pods, and deleted with them (a claim
// bound in the first run would decide nothing in the second).
type row struct {
	name     string // its nodes' and pods' name prefix and rowLabel value
	what     string // the constraint, in kube-scheduler's terms
	nodes    []node
	fixtures []*corev1.Pod
	pods     []*corev1.Pod
	volumes  []*corev1.PersistentVolume
	claims   []*corev1.PersistentVolumeClaim
	// groups are Workload API PodGroups, made for each run as its claims
	// are.
	groups  []*schedulingv1beta1.PodGroup
	compare compare
	// preempts: the row's outcome waits for preemption to settle (no pod
	// of it pending with a nominated node or being deleted), and a pod
	// deleted (a victim) ends gone.
	preempts bool
	// check, when set, is what else each run must end with beside its
	// pods' outcome (a claim bound, on its pod's node).
	check func(context.Context, kubernetes.Interface, outcome) error
	// gap, when set, says how Tessera ends the row otherwise today (issue
	// 36): the row must still end differently, and the test fails when it
	// no longer does, so that the gap is dropped with the fix.
	gap string
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

// pod is a pod of row (it selects the row's nodes) asking 100m CPU, edited
// by opts.
func pod(row, name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{rowLabel: row}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{rowLabel: row}, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// fixture is a pod another scheduler bound to node.
func fixture(row, name, node string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := pod(row, name, opts...)
	p.Spec.NodeSelector = nil
	p.Spec.NodeName = node
	p.Spec.SchedulerName = "another-scheduler"
	return p
}

func labels(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// limits adds resource limits (extended resources and hugepages ask by
// their limits; the API server copies them to requests).
func limits(rl corev1.ResourceList) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Containers[0].Resources.Limits == nil {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{}
		}
		maps.Copy(p.Spec.Containers[0].Resources.Limits, rl)
	}
}

func cpu(v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = q(v) }
}

// gpuShare asks Tessera for a share of one GPU; the oracle's copy of the
// pod goes without it (withoutGPU).
func gpuShare(fraction string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		limits(corev1.ResourceList{workload.ResourceGPU: q("1")})(p)
		p.Annotations = map[string]string{workload.AnnotationCompute: fraction}
	}
}

func podAffinity(anti bool, app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		terms := []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: hostnameKey}}
		if anti {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
		} else {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
		}
	}
}

func onNode(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector[hostnameKey] = name }
}

func tolerate(key, value string, effect corev1.TaintEffect) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: effect})
	}
}

func nodeAffinity(term corev1.NodeSelectorTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}}}
	}
}

// nodes names n nodes of row: row-1 ... row-n.
func nodes(row string, n int) []node {
	out := make([]node, n)
	for i := range out {
		out[i] = node{name: fmt.Sprintf("%s-%d", row, i+1)}
	}
	return out
}

// rows are issue 36's constraints: the hard ones kube-scheduler's plugins
// decide for the pods that name them, volumes among them, and the soft
// ones' direction among nodes alike.
func rows() []row {
	gpuNode := func(name string, alloc corev1.ResourceList) node { return node{name: name, gpus: 2, alloc: alloc} }
	var out []row
	add := func(r row) { out = append(out, r) }

	aa := []*corev1.Pod{}
	for i := 1; i <= 4; i++ {
		aa = append(aa, pod("aa", fmt.Sprintf("aa-web-%d", i), labels("app", "aa-web"), podAffinity(true, "aa-web")))
	}
	add(row{name: "aa", what: "InterPodAffinity: required pod anti-affinity, 4 replicas on 3 nodes (hostname)", nodes: nodes("aa", 3), pods: aa, compare: byNodes})

	add(row{name: "ex", what: "InterPodAffinity: an existing pod's required anti-affinity against the newcomer", nodes: nodes("ex", 2),
		fixtures: []*corev1.Pod{fixture("ex", "ex-loner", "ex-1", podAffinity(true, "ex-newcomer"))},
		pods:     []*corev1.Pod{pod("ex", "ex-newcomer", labels("app", "ex-newcomer"))}, compare: byPod})

	add(row{name: "af", what: "InterPodAffinity: required pod affinity to a running pod", nodes: nodes("af", 3),
		fixtures: []*corev1.Pod{fixture("af", "af-db", "af-2", labels("app", "af-db"))},
		pods:     []*corev1.Pod{pod("af", "af-client", podAffinity(false, "af-db"))}, compare: byPod})

	sp := nodes("sp", 3)
	for i := range sp {
		sp[i].labels = map[string]string{zoneKey: fmt.Sprintf("z%d", i+1)}
	}
	var spread []*corev1.Pod
	for i := 1; i <= 6; i++ {
		spread = append(spread, pod("sp", fmt.Sprintf("sp-%d", i), labels("app", "sp"), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sp"}}}}
		}))
	}
	add(row{name: "sp", what: "PodTopologySpread: maxSkew 1, DoNotSchedule, 3 zones, 6 pods", nodes: sp, pods: spread, compare: byNodes})

	port := func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	}
	add(row{name: "hp", what: "NodePorts: two pods with the same hostPort, one node", nodes: nodes("hp", 1),
		pods: []*corev1.Pod{pod("hp", "hp-a", port), pod("hp", "hp-b", port)}, compare: byCount})

	fpga := corev1.ResourceList{"example.com/fpga": q("1")}
	add(row{name: "fp", what: "NodeResourcesFit: extended resource example.com/fpga: 1, 3 pods, one node has one",
		nodes: []node{{name: "fp-1", alloc: fpga}, {name: "fp-2"}},
		pods:  []*corev1.Pod{pod("fp", "fp-a", limits(fpga)), pod("fp", "fp-b", limits(fpga)), pod("fp", "fp-c", limits(fpga))}, compare: byNodes})

	huge := corev1.ResourceList{"hugepages-2Mi": q("600Mi")}
	add(row{name: "hg", what: "NodeResourcesFit: hugepages-2Mi 600Mi each, 1Gi on the node",
		nodes: []node{{name: "hg-1", alloc: corev1.ResourceList{"hugepages-2Mi": q("1Gi")}}},
		pods:  []*corev1.Pod{pod("hg", "hg-a", limits(huge)), pod("hg", "hg-b", limits(huge))}, compare: byCount})

	rdma := corev1.ResourceList{"rdma/hca": q("1")}
	add(row{name: "gr", what: "NodeResourcesFit: two 0.5-GPU pods also asking rdma/hca: 1; one of two GPU nodes has one (the oracle's pods ask rdma/hca alone)",
		nodes: []node{gpuNode("gr-1", rdma), gpuNode("gr-2", nil)},
		pods:  []*corev1.Pod{pod("gr", "gr-a", gpuShare("0.5"), limits(rdma)), pod("gr", "gr-b", gpuShare("0.5"), limits(rdma))}, compare: byNodes})

	// A pod named to a node is kubelet's at once, and takes its room.
	add(row{name: "nn", what: "NodeName: a pod made with spec.nodeName takes its node's only CPU; the next goes elsewhere",
		nodes: []node{{name: "nn-1", alloc: corev1.ResourceList{corev1.ResourceCPU: q("1")}}, {name: "nn-2", alloc: corev1.ResourceList{corev1.ResourceCPU: q("1")}}},
		pods: []*corev1.Pod{
			pod("nn", "nn-named", cpu("1"), func(p *corev1.Pod) { p.Spec.NodeName = "nn-1" }),
			pod("nn", "nn-free", cpu("1")),
		}, compare: byPod})

	add(row{name: "us", what: "NodeUnschedulable: a cordoned node takes only pods tolerating node.kubernetes.io/unschedulable",
		nodes: []node{{name: "us-1", unschedulable: true}, {name: "us-2"}},
		pods: []*corev1.Pod{
			pod("us", "us-a"), pod("us", "us-b"),
			pod("us", "us-tolerant", onNode("us-1"), tolerate(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule)),
		}, compare: byPod})

	add(row{name: "tt", what: "TaintToleration: a NoSchedule taint keeps pods off but those tolerating it",
		nodes: []node{{name: "tt-1", taints: []corev1.Taint{{Key: "dedicated", Value: "infer", Effect: corev1.TaintEffectNoSchedule}}}, {name: "tt-2"}},
		pods: []*corev1.Pod{
			pod("tt", "tt-a"), pod("tt", "tt-b"),
			pod("tt", "tt-tolerant", onNode("tt-1"), tolerate("dedicated", "infer", corev1.TaintEffectNoSchedule)),
			pod("tt", "tt-intolerant", onNode("tt-1")),
		}, compare: byPod})

	na := nodes("na", 3)
	na[0].labels = map[string]string{"disk": "hdd"}
	na[1].labels = map[string]string{"disk": "ssd"}
	ssd := nodeAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}})
	add(row{name: "na", what: "NodeAffinity: required node affinity by label, and by metadata.name (as DaemonSets pin pods)", nodes: na,
		pods: []*corev1.Pod{
			pod("na", "na-ssd-a", ssd), pod("na", "na-ssd-b", ssd),
			pod("na", "na-named", nodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"na-3"}}}})),
			pod("na", "na-nowhere", nodeAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"nvme"}}}})),
		}, compare: byPod})

	add(row{name: "sg", what: "SchedulingGates: a gated pod waits; its ungated twin binds", nodes: nodes("sg", 1),
		pods: []*corev1.Pod{
			pod("sg", "sg-gated", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}} }),
			pod("sg", "sg-free"),
		}, compare: byPod})

	rwo := corev1.ReadWriteOnce
	lvA, lvB := localVolume("pv-lv-a", "lv-1"), localVolume("pv-lv-b", "lv-2")
	add(row{name: "lv", what: "VolumeBinding: claims bound to local volumes on two different nodes", nodes: nodes("lv", 3),
		volumes: []*corev1.PersistentVolume{lvA, lvB},
		claims:  []*corev1.PersistentVolumeClaim{claim("lv-a", localClass, rwo, lvA), claim("lv-b", localClass, rwo, lvB)},
		pods:    []*corev1.Pod{pod("lv", "lv-pod-a", withClaim("lv-a")), pod("lv", "lv-pod-b", withClaim("lv-b"))}, compare: byPod})

	add(row{name: "ws", what: "VolumeBinding: a WaitForFirstConsumer claim, a free local volume on one of 3 nodes", nodes: nodes("ws", 3),
		volumes: []*corev1.PersistentVolume{localVolume("pv-ws-free", "ws-2")},
		claims:  []*corev1.PersistentVolumeClaim{claim("ws-data", localClass, rwo, nil)},
		pods:    []*corev1.Pod{pod("ws", "ws-pod", withClaim("ws-data"))}, compare: byPod,
		check: claimEnds("ws-data", "pv-ws-free", "")})

	add(row{name: "dy", what: "VolumeBinding: a dynamic WaitForFirstConsumer claim, provisioned on the node picked (selected-node)", nodes: nodes("dy", 3),
		claims: []*corev1.PersistentVolumeClaim{claim("dy-scratch", dynamicClass, rwo, nil)},
		pods:   []*corev1.Pod{pod("dy", "dy-pod", withClaim("dy-scratch"))}, compare: byCount,
		check: claimEnds("dy-scratch", "", "dy-pod")})

	vz := nodes("vz", 3)
	for i := range vz {
		vz[i].labels = map[string]string{zoneKey: fmt.Sprintf("z%d", i+1)}
	}
	vzData := csiVolume("pv-vz-data", rwo, map[string]string{zoneKey: "z2"})
	add(row{name: "vz", what: "VolumeZone: a bound volume labelled with zone z2 of 3", nodes: vz,
		volumes: []*corev1.PersistentVolume{vzData}, claims: []*corev1.PersistentVolumeClaim{claim("vz-data", "", rwo, vzData)},
		pods: []*corev1.Pod{pod("vz", "vz-pod", withClaim("vz-data"))}, compare: byPod})

	al1, al2 := csiVolume("pv-al-1", rwo, nil), csiVolume("pv-al-2", rwo, nil)
	add(row{name: "al", what: "NodeVolumeLimits: a CSI attach limit of 1, two pods with a bound CSI volume each",
		nodes:   []node{{name: "al-1", attachLimit: 1}},
		volumes: []*corev1.PersistentVolume{al1, al2},
		claims:  []*corev1.PersistentVolumeClaim{claim("al-1", "", rwo, al1), claim("al-2", "", rwo, al2)},
		pods:    []*corev1.Pod{pod("al", "al-a", withClaim("al-1")), pod("al", "al-b", withClaim("al-2"))}, compare: byCount})

	rwop := corev1.ReadWriteOncePod
	rwData := csiVolume("pv-rw-data", rwop, nil)
	add(row{name: "rw", what: "VolumeRestrictions: a ReadWriteOncePod claim used by two pods", nodes: nodes("rw", 2),
		volumes: []*corev1.PersistentVolume{rwData}, claims: []*corev1.PersistentVolumeClaim{claim("rw-data", "", rwop, rwData)},
		pods: []*corev1.Pod{pod("rw", "rw-a", withClaim("rw-data")), pod("rw", "rw-b", withClaim("rw-data"))}, compare: byCount})

	// Soft constraints: the nodes of each row are alike, so the
	// preference alone decides (kube-scheduler breaks ties among equal
	// scores at random: byNodes).
	var pa []*corev1.Pod
	for i := 1; i <= 3; i++ {
		pa = append(pa, pod("pa", fmt.Sprintf("pa-web-%d", i), labels("app", "pa-web"), func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pa-web"}}, TopologyKey: hostnameKey}}}}}
		}))
	}
	add(row{name: "pa", what: "InterPodAffinity (score): preferred pod anti-affinity, 3 replicas on 3 nodes", nodes: nodes("pa", 3), pods: pa, compare: byNodes})

	sa := nodes("sa", 3)
	for i := range sa {
		sa[i].labels = map[string]string{zoneKey: fmt.Sprintf("z%d", i+1)}
	}
	var anyway []*corev1.Pod
	for i := 1; i <= 6; i++ {
		anyway = append(anyway, pod("sa", fmt.Sprintf("sa-%d", i), labels("app", "sa"), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sa"}}}}
		}))
	}
	add(row{name: "sa", what: "PodTopologySpread (score): maxSkew 1, ScheduleAnyway, 3 zones, 6 pods", nodes: sa, pods: anyway, compare: byNodes})

	pn := nodes("pn", 3)
	for i := range pn {
		pn[i].labels = map[string]string{"disk": "hdd"}
	}
	pn[1].labels["disk"] = "ssd"
	add(row{name: "pn", what: "NodeAffinity (score): preferred node affinity to disk=ssd, one of 3 nodes", nodes: pn,
		pods: []*corev1.Pod{pod("pn", "pn-fast", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}}}}}}
		})}, compare: byNodes})

	var pc []*corev1.Pod
	for i := 1; i <= 5; i++ {
		pc = append(pc, pod("pc", fmt.Sprintf("pc-%d", i)))
	}
	add(row{name: "pc", what: "NodeResourcesFit: a node with pods: 3 allocatable, 5 pods (Too many pods)",
		nodes: []node{{name: "pc-1", alloc: corev1.ResourceList{corev1.ResourcePods: q("3")}}}, pods: pc, compare: byCount})
	out = append(out, preemptionRows()...)
	return append(out, gangRows()...)
}

// nodeObject is n as a KWOK node of row.
func (n node) object(row string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: q("8"), corev1.ResourceMemory: q("32Gi"), corev1.ResourcePods: q("110")}
	maps.Copy(res, n.alloc)
	l := map[string]string{rowLabel: row, hostnameKey: n.name}
	maps.Copy(l, n.labels)
	if n.gpus > 0 {
		l[nodeinventory.LabelModel], l[nodeinventory.LabelCount] = "H100", fmt.Sprint(n.gpus)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: l, Annotations: map[string]string{fakeNodeAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{Taints: n.taints, Unschedulable: n.unschedulable},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
}
