package kubefilter

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

var (
	q     = resource.MustParse
	web   = map[string]string{"app": "web"}
	three = func() []*corev1.Node {
		return []*corev1.Node{node("n1", "z1", nil), node("n2", "z2", nil), node("n3", "z3", nil)}
	}
)

// TestCheck: issue 36's hard constraints, one row each, decided by
// kube-scheduler's own plugins: which candidates pass, and which plugin
// rejected each other one (with a word of its own message).
func TestCheck(t *testing.T) {
	type rejected struct{ plugin, says string }
	cases := []struct {
		name   string
		nodes  []*corev1.Node
		placed []*corev1.Pod
		objs   []runtime.Object
		pod    *corev1.Pod
		fit    []string
		reject map[string]rejected
	}{{
		name:  "required anti-affinity: a 4th replica over 3 nodes each holding one",
		nodes: three(),
		placed: []*corev1.Pod{
			with(pod("web-1", "n1", web, nil), antiAffinity(term("app", "web", hostname))),
			with(pod("web-2", "n2", web, nil), antiAffinity(term("app", "web", hostname))),
			with(pod("web-3", "n3", web, nil), antiAffinity(term("app", "web", hostname))),
		},
		pod: with(pod("web-4", "", web, nil), antiAffinity(term("app", "web", hostname))),
		reject: map[string]rejected{
			"n1": {"InterPodAffinity", "anti-affinity"}, "n2": {"InterPodAffinity", "anti-affinity"}, "n3": {"InterPodAffinity", "anti-affinity"},
		},
	}, {
		name:   "an existing pod's anti-affinity against the newcomer",
		nodes:  []*corev1.Node{node("n1", "", nil), node("n2", "", nil)},
		placed: []*corev1.Pod{with(pod("loner", "n1", nil, nil), antiAffinity(term("app", "newcomer", hostname)))},
		pod:    pod("newcomer", "", map[string]string{"app": "newcomer"}, nil),
		fit:    []string{"n2"},
		reject: map[string]rejected{"n1": {"InterPodAffinity", "existing pods anti-affinity"}},
	}, {
		name:   "required affinity to a running pod",
		nodes:  three(),
		placed: []*corev1.Pod{pod("db", "n2", map[string]string{"app": "db"}, nil)},
		pod:    with(pod("client", "", nil, nil), affinity(term("app", "db", hostname))),
		fit:    []string{"n2"},
		reject: map[string]rejected{"n1": {"InterPodAffinity", "affinity"}, "n3": {"InterPodAffinity", "affinity"}},
	}, {
		name:  "topology spread maxSkew 1 over 3 zones (DoNotSchedule), 2+2+1 placed",
		nodes: three(),
		placed: []*corev1.Pod{
			pod("s1", "n1", web, nil), pod("s2", "n1", web, nil), pod("s3", "n2", web, nil), pod("s4", "n2", web, nil), pod("s5", "n3", web, nil),
		},
		pod:    with(pod("s6", "", web, nil), spread(corev1.DoNotSchedule, "web")),
		fit:    []string{"n3"},
		reject: map[string]rejected{"n1": {"PodTopologySpread", "topology spread"}, "n2": {"PodTopologySpread", "topology spread"}},
	}, {
		name:   "same hostPort",
		nodes:  []*corev1.Node{node("n1", "", nil), node("n2", "", nil)},
		placed: []*corev1.Pod{with(pod("p1", "n1", nil, nil), hostPort(8080))},
		pod:    with(pod("p2", "", nil, nil), hostPort(8080)),
		fit:    []string{"n2"},
		reject: map[string]rejected{"n1": {"NodePorts", "free ports"}},
	}, {
		name:   "node max pods: 3 allowed, 3 placed",
		nodes:  []*corev1.Node{node("n1", "", corev1.ResourceList{corev1.ResourcePods: q("3")}), node("n2", "", nil)},
		placed: []*corev1.Pod{pod("a", "n1", nil, nil), pod("b", "n1", nil, nil), pod("c", "n1", nil, nil)},
		pod:    pod("d", "", nil, nil),
		fit:    []string{"n2"},
		reject: map[string]rejected{"n1": {"NodeResourcesFit", "Too many pods"}},
	}, {
		name: "extended resource example.com/fpga: 1, the only one taken",
		nodes: []*corev1.Node{node("n1", "", corev1.ResourceList{"example.com/fpga": q("1")}), node("n2", "", nil),
			node("n3", "", corev1.ResourceList{"example.com/fpga": q("1")})},
		placed: []*corev1.Pod{pod("f1", "n1", nil, corev1.ResourceList{"example.com/fpga": q("1")})},
		pod:    pod("f2", "", nil, corev1.ResourceList{"example.com/fpga": q("1")}),
		fit:    []string{"n3"},
		reject: map[string]rejected{"n1": {"NodeResourcesFit", "Insufficient example.com/fpga"}, "n2": {"NodeResourcesFit", "Insufficient example.com/fpga"}},
	}, {
		name: "hugepages-2Mi 600Mi each, 1Gi on the node",
		nodes: []*corev1.Node{node("n1", "", corev1.ResourceList{"hugepages-2Mi": q("1Gi")}),
			node("n2", "", corev1.ResourceList{"hugepages-2Mi": q("1Gi")})},
		placed: []*corev1.Pod{pod("h1", "n1", nil, corev1.ResourceList{"hugepages-2Mi": q("600Mi"), corev1.ResourceMemory: q("600Mi")})},
		pod:    pod("h2", "", nil, corev1.ResourceList{"hugepages-2Mi": q("600Mi"), corev1.ResourceMemory: q("600Mi")}),
		fit:    []string{"n2"},
		reject: map[string]rejected{"n1": {"NodeResourcesFit", "Insufficient hugepages-2Mi"}},
	}, {
		name: "rdma/hca: 1 beside a 0.5 GPU: only the node with one; the GPU is Tessera's (no tessera.io/gpu on any node)",
		nodes: []*corev1.Node{node("gpu-a", "", corev1.ResourceList{"rdma/hca": q("1")}), node("gpu-b", "", nil),
			node("gpu-c", "", corev1.ResourceList{"rdma/hca": q("1")})},
		placed: []*corev1.Pod{pod("r1", "gpu-c", nil, corev1.ResourceList{"tessera.io/gpu": q("1"), "rdma/hca": q("1")})},
		pod:    with(pod("r2", "", nil, corev1.ResourceList{"tessera.io/gpu": q("1"), "rdma/hca": q("1")}), func(p *corev1.Pod) { p.Annotations = map[string]string{"tessera.io/gpu-fraction": "0.5"} }),
		fit:    []string{"gpu-a"},
		reject: map[string]rejected{"gpu-b": {"NodeResourcesFit", "Insufficient rdma/hca"}, "gpu-c": {"NodeResourcesFit", "Insufficient rdma/hca"}},
	}, {
		name:  "GPU resources alone are never NodeResourcesFit's: 2 nvidia.com/gpu where the node advertises 1",
		nodes: []*corev1.Node{node("n1", "", corev1.ResourceList{"nvidia.com/gpu": q("1")})},
		pod:   pod("g", "", nil, corev1.ResourceList{"nvidia.com/gpu": q("2")}),
		fit:   []string{"n1"},
	}, {
		name:   "claim bound to a local PersistentVolume on n2",
		nodes:  three(),
		objs:   append(localVolume("data", "n2"), localClass()),
		pod:    with(pod("trainer", "", nil, nil), claim("data")),
		fit:    []string{"n2"},
		reject: map[string]rejected{"n1": {"VolumeBinding", "PersistentVolume's node affinity"}, "n3": {"VolumeBinding", "PersistentVolume's node affinity"}},
	}, {
		name:  "a claim that does not exist: PreFilter rules out every node",
		nodes: three(),
		pod:   with(pod("orphan", "", nil, nil), claim("missing")),
		// VolumeRestrictions' PreFilter runs before VolumeBinding's, as in kube-scheduler.
		reject: map[string]rejected{"n1": {"VolumeRestrictions", "not found"}, "n2": {"VolumeRestrictions", "not found"}, "n3": {"VolumeRestrictions", "not found"}},
	}, {
		name:  "node affinity on metadata.name (as DaemonSets write it): PreFilter narrows the nodes",
		nodes: three(),
		pod: with(pod("pinned", "", nil, nil), func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}}}},
			}}}
		}),
		fit:    []string{"n2"},
		reject: map[string]rejected{"n1": {"NodeAffinity", "didn't satisfy plugin(s) [NodeAffinity]"}, "n3": {"NodeAffinity", "didn't satisfy plugin(s) [NodeAffinity]"}},
	}, {
		name:   "NoSchedule taint and an unschedulable node",
		nodes:  []*corev1.Node{tainted(node("n1", "", nil)), cordoned(node("n2", "", nil)), node("n3", "", nil)},
		pod:    pod("p", "", nil, nil),
		fit:    []string{"n3"},
		reject: map[string]rejected{"n1": {"TaintToleration", "untolerated taint"}, "n2": {"NodeUnschedulable", "unschedulable"}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFilter(t, c.nodes, c.placed, c.objs...)
			v, err := f.Check(context.Background(), c.pod, nodeNames(c.nodes))
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if !slices.Equal(v.Fit, c.fit) {
				t.Errorf("fit = %v, want %v (rejected: %v)", v.Fit, c.fit, v.Rejected)
			}
			if got, want := slices.Sorted(maps.Keys(v.Rejected)), slices.Sorted(maps.Keys(c.reject)); !slices.Equal(got, want) {
				t.Errorf("rejected nodes = %v, want %v", got, want)
			}
			for n, want := range c.reject {
				got := v.Rejected[n]
				if got.Plugin != want.plugin || !strings.Contains(strings.Join(got.Reasons, "; "), want.says) {
					t.Errorf("node %s rejected by %s, want %s saying %q", n, got, want.plugin, want.says)
				}
			}
		})
	}
}

// TestCheckAssumed: replicas placed one by one, each assumed on the first
// node that takes it (as a scheduler binds): required anti-affinity puts
// 3 of 4 on 3 nodes and leaves the 4th with none; forgetting one frees its
// node for the 4th.
func TestCheckAssumed(t *testing.T) {
	nodes := three()
	f := newFilter(t, nodes, nil)
	replica := func(name string) *corev1.Pod {
		return with(pod(name, "", web, nil), antiAffinity(term("app", "web", hostname)))
	}
	var placed []*corev1.Pod
	for _, name := range []string{"web-1", "web-2", "web-3", "web-4"} {
		p := replica(name)
		v, err := f.Check(context.Background(), p, nodeNames(nodes))
		if err != nil {
			t.Fatalf("Check %s: %v", name, err)
		}
		if len(v.Fit) == 0 {
			if name != "web-4" {
				t.Fatalf("%s fits nowhere: %v", name, v.Rejected)
			}
			continue
		}
		if name == "web-4" {
			t.Fatalf("web-4 fits %v beside 3 replicas on 3 nodes", v.Fit)
		}
		p.Spec.NodeName = v.Fit[0]
		if err := f.AssumePod(p); err != nil {
			t.Fatalf("AssumePod: %v", err)
		}
		placed = append(placed, p)
	}
	if got := []string{placed[0].Spec.NodeName, placed[1].Spec.NodeName, placed[2].Spec.NodeName}; !slices.Equal(got, nodeNames(nodes)) {
		t.Errorf("replicas on %v, want one per node %v", got, nodeNames(nodes))
	}
	if err := f.ForgetPod(placed[1]); err != nil {
		t.Fatalf("ForgetPod: %v", err)
	}
	v, err := f.Check(context.Background(), replica("web-4"), nodeNames(nodes))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !slices.Equal(v.Fit, []string{placed[1].Spec.NodeName}) {
		t.Errorf("after forgetting web-2, web-4 fits %v, want [%s]", v.Fit, placed[1].Spec.NodeName)
	}
}

// TestCheckUnknownNode: a candidate the cache does not hold is rejected as
// such, not an error.
func TestCheckUnknownNode(t *testing.T) {
	f := newFilter(t, []*corev1.Node{node("n1", "", nil)}, nil)
	v, err := f.Check(context.Background(), pod("p", "", nil, nil), []string{"n1", "ghost"})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !slices.Equal(v.Fit, []string{"n1"}) || v.Rejected["ghost"].Plugin != NotInSnapshot {
		t.Errorf("fit %v, rejected %v; want [n1] and ghost %s", v.Fit, v.Rejected, NotInSnapshot)
	}
}

func tainted(n *corev1.Node) *corev1.Node {
	n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	return n
}

func cordoned(n *corev1.Node) *corev1.Node { n.Spec.Unschedulable = true; return n }
