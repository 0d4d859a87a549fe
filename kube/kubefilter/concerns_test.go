package kubefilter

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConcerns: pods the fast path decides alone (false) and pods the
// plugins must filter (true), both ways.
func TestConcerns(t *testing.T) {
	gpu := corev1.ResourceList{"tessera.io/gpu": q("1"), corev1.ResourceMemory: q("1Gi")}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"CPU, memory, a GPU, node-local volumes, node selector, toleration, overhead", with(pod("plain", "", web, gpu), func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"pool": "a"}
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
			p.Spec.Volumes = []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			}
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: q("250m")}
		}), false},
		{"HAMi and nvidia.com GPU resources", pod("hami", "", nil, corev1.ResourceList{"nvidia.com/gpu": q("1"), "nvidia.com/gpumem": q("4000")}), false},
		{"preferred anti-affinity and ScheduleAnyway spread (soft)", with(with(pod("soft", "", web, nil), func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: term("app", "web", hostname)}}}}
		}), spread(corev1.ScheduleAnyway, "web")), false},
		{"required anti-affinity", with(pod("a", "", web, nil), antiAffinity(term("app", "web", hostname))), true},
		{"required affinity", with(pod("b", "", nil, nil), affinity(term("app", "db", hostname))), true},
		{"DoNotSchedule spread", with(pod("c", "", web, nil), spread(corev1.DoNotSchedule, "web")), true},
		{"host port", with(pod("d", "", nil, nil), hostPort(80)), true},
		{"claim", with(pod("e", "", nil, nil), claim("data")), true},
		{"ephemeral storage", pod("f", "", nil, corev1.ResourceList{corev1.ResourceEphemeralStorage: q("1Gi")}), true},
		{"hugepages", pod("g", "", nil, corev1.ResourceList{"hugepages-2Mi": q("600Mi")}), true},
		{"extended resource beside a GPU", pod("h", "", nil, corev1.ResourceList{"tessera.io/gpu": q("1"), "rdma/hca": q("1")}), true},
		{"extended resource in an init container", with(pod("i", "", nil, nil), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/fpga": q("1")}}}}
		}), true},
	}
	f := newFilter(t, three(), nil)
	for _, c := range cases {
		got, err := f.Concerns(c.pod)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: Concerns = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestConcernsPlacedAntiAffinity: a plain pod is concerned exactly when a
// placed pod's required anti-affinity selects it (same namespace, or any
// namespace selector), and no longer once that pod is removed.
func TestConcernsPlacedAntiAffinity(t *testing.T) {
	loner := with(pod("loner", "n1", nil, nil), antiAffinity(term("app", "batch", hostname)))
	wide := with(pod("wide", "n2", nil, nil), antiAffinity(term("app", "web", hostname)))
	wide.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	wide.Namespace = "other"
	f := newFilter(t, three(), []*corev1.Pod{loner, wide})
	for _, c := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod("batch", "", map[string]string{"app": "batch"}, nil), true},  // loner's term
		{pod("web", "", web, nil), true},                                  // wide's, through its namespace selector
		{pod("other", "", map[string]string{"app": "other"}, nil), false}, // nobody's
		{with(pod("batch", "", map[string]string{"app": "batch"}, nil), func(p *corev1.Pod) { p.Namespace = "elsewhere" }), false},
	} {
		got, err := f.Concerns(c.pod)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("pod %s/%s labels %v: Concerns = %v, want %v", c.pod.Namespace, c.pod.Name, c.pod.Labels, got, c.want)
		}
	}
	if err := f.RemovePod(loner); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Concerns(pod("batch", "", map[string]string{"app": "batch"}, nil)); got {
		t.Error("Concerns = true after the pod whose anti-affinity selected it was removed")
	}
}

// TestForFramework: the plugins' copy lacks GPU resources (and
// tessera.io/gpu-milli, which no node advertises), the caller's
// pod keeps them, and a pod without any is passed as is.
func TestForFramework(t *testing.T) {
	p := pod("g", "", nil, corev1.ResourceList{"tessera.io/gpu": q("1"), "tessera.io/gpu-milli": q("250"), "rdma/hca": q("1")})
	c := ForFramework(p)
	for _, n := range []corev1.ResourceName{"tessera.io/gpu", "tessera.io/gpu-milli"} {
		if _, ok := c.Spec.Containers[0].Resources.Limits[n]; ok {
			t.Errorf("the plugins' copy still asks %s", n)
		}
	}
	if _, ok := c.Spec.Containers[0].Resources.Limits["rdma/hca"]; !ok {
		t.Error("the plugins' copy lost rdma/hca")
	}
	if _, ok := p.Spec.Containers[0].Resources.Limits["tessera.io/gpu"]; !ok {
		t.Error("ForFramework changed the caller's pod")
	}
	if plain := pod("p", "", nil, nil); ForFramework(plain) != plain {
		t.Error("a pod without GPU resources was copied")
	}
}
