package scheduler

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/kubefilter"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestFastPathUntouched: with kube-scheduler's plugins wired in, a pod
// they do not concern is translated exactly as without them (the same
// workload; no per-node exclusion where none was made, the same reasons
// where one was), and is not filtered; a pod they concern (required
// anti-affinity) always gets a per-node exclusion, which says a plugin's
// rejection for the node a replica holds.
func TestFastPathUntouched(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(Config{Client: fake.NewClientset(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	kf, err := kubefilter.New(ctx, kubefilter.Config{SchedulerName: DefaultName, Client: client, Informers: informers.NewSharedInformerFactory(client, 0)})
	if err != nil {
		t.Fatal(err)
	}
	s.filter = kf
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	var nodes []*corev1.Node
	for _, name := range []string{"a", "b", "c"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "2", "zone": name, "kubernetes.io/hostname": name}},
			Status: corev1.NodeStatus{Conditions: ready, Allocatable: alloc, Capacity: alloc}}
		nodes = append(nodes, n)
		kf.AddNode(n)
	}
	snap := buildSnapshot(log, nodeinventory.Labels{Catalog: catalog.Default()}, nodes, nil)
	// s translates without the plugins (filter nil, as before them) or
	// with them.
	without := func(p *corev1.Pod) (podWork, error) {
		s.filter = nil
		defer func() { s.filter = kf }()
		return s.podWorkOf(ctx, snap, p)
	}
	gpuPod := func(name string, edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}}}
		edit(p)
		return p
	}
	unconcerned := map[string]*corev1.Pod{
		"plain":         gpuPod("plain", func(*corev1.Pod) {}),
		"node selector": gpuPod("sel", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }),
	}
	for what, p := range unconcerned {
		want, err := without(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.podWorkOf(ctx, snap, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.filtered {
			t.Errorf("%s: filtered", what)
		}
		if (got.w.Exclude == nil) != (want.w.Exclude == nil) {
			t.Errorf("%s: per-node exclusion %v, without the plugins %v", what, got.w.Exclude != nil, want.w.Exclude != nil)
		}
		for i := range snap.nodes {
			if got.w.Exclude != nil && got.w.Exclude(i) != want.w.Exclude(i) {
				t.Errorf("%s on node %d: %q, without the plugins %q", what, i, got.w.Exclude(i), want.w.Exclude(i))
			}
			if got.w.PreemptExclude != nil && got.w.PreemptExclude(i) != want.w.Exclude(i) {
				t.Errorf("%s on node %d for preemption: %q, without the plugins %q", what, i, got.w.PreemptExclude(i), want.w.Exclude(i))
			}
		}
		gw, ww := got.w, want.w
		gw.Exclude, ww.Exclude, gw.PreemptExclude, ww.PreemptExclude = nil, nil, nil, nil
		if !reflect.DeepEqual(gw, ww) || !reflect.DeepEqual(got.reqs, want.reqs) {
			t.Errorf("%s: workload %+v, without the plugins %+v", what, gw, ww)
		}
	}
	if pw, _ := without(unconcerned["plain"]); pw.w.Exclude != nil {
		t.Fatal("the plain pod has a per-node exclusion even without the plugins: the test shows nothing")
	}

	anti := func(name string) *corev1.Pod {
		return gpuPod(name, func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: "kubernetes.io/hostname"}}}}
		})
	}
	pw, err := s.podWorkOf(ctx, snap, anti("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !pw.filtered || pw.w.Exclude == nil || pw.w.Exclude(0) != "" {
		t.Fatalf("concerned pod: filtered %v, exclusion %v", pw.filtered, pw.w.Exclude != nil)
	}
	if why, err := kf.Reserve(ctx, anti("web-1"), "a", true); why != "" || err != nil {
		t.Fatalf("Reserve web-1 on a: %q, %v", why, err)
	}
	pw, err = s.podWorkOf(ctx, snap, anti("web-2"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pw.w.Exclude(index(snap, "a")), "InterPodAffinity: node(s) didn't match pod anti-affinity rules"; got != want {
		t.Errorf("web-2 on a beside web-1: %q, want %q", got, want)
	}
	if got := pw.w.Exclude(index(snap, "b")); got != "" {
		t.Errorf("web-2 on b: %q", got)
	}
}
