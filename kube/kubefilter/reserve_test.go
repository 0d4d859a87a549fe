package kubefilter

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// fedFilter is a Filter fed by informers over a fake clientset holding
// nodes, through NodeHandler and PodHandler, as kube/scheduler feeds it.
func fedFilter(t *testing.T, nodes []*corev1.Node) (*Filter, kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset()
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	f, err := New(ctx, Config{SchedulerName: "tessera", Client: client, Informers: factory})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var synced []cache.InformerSynced
	for inf, h := range map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		factory.Core().V1().Nodes().Informer(): f.NodeHandler(), factory.Core().V1().Pods().Informer(): f.PodHandler(),
	} {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			t.Fatal(err)
		}
		synced = append(synced, reg.HasSynced)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("handlers did not sync")
	}
	return f, client
}

// eventually polls check until it passes (informer events arrive on
// their own goroutines); the deadline is a liveness bound only.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reserveOn is a checked Reserve with a test failure for an error.
func reserveOn(t *testing.T, f *Filter, p *corev1.Pod, node string) string {
	t.Helper()
	return reserveOnWith(t, f, p, node, true)
}

// TestExcludeFastPath: a pod no plugin concerns keeps the caller's own
// exclusion, the very function (nil stays nil); a nil Filter changes
// nothing and holds nothing.
func TestExcludeFastPath(t *testing.T) {
	nodes := three()
	f, _ := fedFilter(t, nodes)
	plain := pod("plain", "", web, nil)
	for _, fl := range []*Filter{f, nil} {
		ex, _, concerned, err := fl.Exclude(context.Background(), plain, nodes, nil, nil)
		if err != nil || ex != nil || concerned {
			t.Errorf("filter %p: plain pod got exclude %v, concerned %v, err %v; want none", fl, ex != nil, concerned, err)
		}
		own := func(i int) string { return fmt.Sprintf("own %d", i) }
		ex, _, _, _ = fl.Exclude(context.Background(), plain, nodes, own, nil)
		if ex == nil || ex(2) != "own 2" {
			t.Errorf("filter %p: the caller's exclusion was not kept", fl)
		}
	}
	var none *Filter
	if why, err := none.Reserve(context.Background(), plain, "n1", true); why != "" || err != nil {
		t.Errorf("nil filter Reserve: %q, %v", why, err)
	}
	none.Unreserve(plain.UID)
}

// TestReserveInCycle: four anti-affinity replicas placed one after another,
// each pick reserved, as one cycle does: a replica is refused a node an
// earlier pick holds with InterPodAffinity's message, the 4th finds none
// of 3 nodes; the concerned pod's Exclude says so with the caller's own
// reasons first; Unreserve frees the node; a binding seen by the informer
// replaces the assumption, which Unreserve then leaves alone.
func TestReserveInCycle(t *testing.T) {
	nodes := three()
	f, client := fedFilter(t, nodes)
	replica := func(name string) *corev1.Pod {
		return with(pod(name, "", web, nil), antiAffinity(term("app", "web", hostname)))
	}
	const refused = "InterPodAffinity: node(s) didn't match pod anti-affinity rules"
	r1, r2, r3, r4 := replica("web-1"), replica("web-2"), replica("web-3"), replica("web-4")
	if why := reserveOn(t, f, r1, "n1"); why != "" {
		t.Fatalf("web-1 on empty n1: %q", why)
	}
	if why := reserveOn(t, f, r2, "n1"); why != refused {
		t.Errorf("web-2 on n1 beside web-1: %q, want %q", why, refused)
	}
	reserveOn(t, f, r2, "n2")
	reserveOn(t, f, r3, "n3")
	own := func(i int) string {
		if i == 0 {
			return "own reason"
		}
		return ""
	}
	ex, _, concerned, err := f.Exclude(context.Background(), r4, nodes, own, nil)
	if err != nil || !concerned {
		t.Fatalf("web-4: concerned %v, err %v", concerned, err)
	}
	for i, want := range []string{"own reason", refused, refused} {
		if got := ex(i); got != want {
			t.Errorf("web-4 on %s: %q, want %q", nodes[i].Name, got, want)
		}
	}

	f.Unreserve(r2.UID)
	if why := reserveOn(t, f, r4, "n2"); why != "" {
		t.Errorf("web-4 on n2 after web-2 was unreserved: %q", why)
	}
	f.Unreserve(r4.UID)

	// web-1's binding lands: the informer's pod replaces the assumed one.
	bound := r1.DeepCopy()
	bound.Spec.NodeName = "n1"
	if _, err := client.CoreV1().Pods("default").Create(context.Background(), bound, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-1's binding seen", func() error {
		f.amu.Lock()
		defer f.amu.Unlock()
		if _, ok := f.assumed[r1.UID]; ok {
			return fmt.Errorf("web-1 still assumed")
		}
		return nil
	})
	f.Unreserve(r1.UID) // a late report of a failed binding: nothing to forget
	if why := reserveOn(t, f, r2, "n1"); why != refused {
		t.Errorf("web-2 on n1 beside bound web-1: %q, want %q", why, refused)
	}

	// Deleted: n1 is free again.
	if err := client.CoreV1().Pods("default").Delete(context.Background(), r1.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-1's deletion seen", func() error {
		v, err := f.Check(context.Background(), r2, []string{"n1"})
		if err != nil || len(v.Fit) != 1 {
			return fmt.Errorf("web-2 on n1: %v %v", v.Rejected, err)
		}
		return nil
	})
}

// TestPodHandlerOtherSchedulers: a pod another scheduler bound, seen by the
// informer, counts: its anti-affinity against the newcomer makes the
// newcomer concerned and rules its node out.
func TestPodHandlerOtherSchedulers(t *testing.T) {
	nodes := []*corev1.Node{node("n1", "", nil), node("n2", "", nil)}
	f, client := fedFilter(t, nodes)
	loner := with(pod("loner", "n1", nil, nil), antiAffinity(term("app", "newcomer", hostname)))
	loner.Spec.SchedulerName = "default-scheduler"
	if _, err := client.CoreV1().Pods("default").Create(context.Background(), loner, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newcomer := pod("newcomer", "", map[string]string{"app": "newcomer"}, nil)
	eventually(t, "the newcomer is concerned", func() error {
		ex, _, concerned, err := f.Exclude(context.Background(), newcomer, nodes, nil, nil)
		if err != nil || !concerned {
			return fmt.Errorf("concerned %v, err %v", concerned, err)
		}
		if got := ex(0); got != "InterPodAffinity: node(s) didn't satisfy existing pods anti-affinity rules" {
			return fmt.Errorf("n1: %q", got)
		}
		if got := ex(1); got != "" {
			return fmt.Errorf("n2: %q", got)
		}
		return nil
	})
}

// TestReserveUnconcerned: the pick of a pod no plugin concerns is assumed
// without a check (it is never refused, even where a check would refuse
// it) and counts for the concerned pods after it: a replica whose
// anti-affinity selects it is refused its node.
func TestReserveUnconcerned(t *testing.T) {
	f, _ := fedFilter(t, three())
	plain := pod("plain", "", web, nil)
	if why := reserveOnWith(t, f, plain, "n1", false); why != "" {
		t.Fatalf("plain on n1: %q", why)
	}
	// A second copy on the same node would fail its own anti-affinity.
	loner := with(pod("loner", "", web, nil), antiAffinity(term("app", "web", hostname)))
	if why := reserveOnWith(t, f, loner, "n1", false); why != "" {
		t.Errorf("unchecked loner on n1: %q", why)
	}
	f.Unreserve(loner.UID)
	if why := reserveOnWith(t, f, loner, "n1", true); why != "InterPodAffinity: node(s) didn't match pod anti-affinity rules" {
		t.Errorf("checked loner on n1 beside plain: %q", why)
	}
	f.Unreserve(plain.UID)
	if why := reserveOnWith(t, f, loner, "n1", true); why != "" {
		t.Errorf("checked loner on n1 once plain is unreserved: %q", why)
	}
}

func reserveOnWith(t *testing.T, f *Filter, p *corev1.Pod, node string, check bool) string {
	t.Helper()
	why, err := f.Reserve(context.Background(), p, node, check)
	if err != nil {
		t.Fatalf("Reserve %s on %s: %v", p.Name, node, err)
	}
	return why
}

// TestReserveVolumes: VolumeBinding's Reserve runs with the pick. Two pods
// each claim a WaitForFirstConsumer local volume; one free volume exists,
// on n1. The first pod's reservation takes it (the plugin's assume cache):
// the second is refused n1 until the first is unreserved; the first has
// PreBind work (its claim to bind), a pod without claims has none.
func TestReserveVolumes(t *testing.T) {
	nodes := []*corev1.Node{node("n1", "", nil), node("n2", "", nil)}
	f := newFilter(t, nodes, nil, localClass(), freeLocalVolume("pv-1", "n1"), unboundClaim("data-a"), unboundClaim("data-b"))
	a := with(pod("a", "", nil, nil), claim("data-a"))
	b := with(pod("b", "", nil, nil), claim("data-b"))
	ctx := context.Background()
	v, err := f.Check(ctx, a, nodeNames(nodes))
	if err != nil || !slices.Equal(v.Fit, []string{"n1"}) {
		t.Fatalf("a: fit %v, rejected %v, err %v; want n1 alone (its only free volume)", v.Fit, v.Rejected, err)
	}
	if why := reserveOn(t, f, a, "n1"); why != "" {
		t.Fatalf("a on n1: %q", why)
	}
	if !f.PreBinds(a.UID) {
		t.Errorf("a: no PreBind work, want its claim bound before its binding")
	}
	const taken = "VolumeBinding: node(s) didn't find available persistent volumes to bind"
	if why := reserveOn(t, f, b, "n1"); why != taken {
		t.Errorf("b on n1 while a holds pv-1: %q, want %q", why, taken)
	}
	f.Unreserve(a.UID)
	if f.PreBinds(a.UID) {
		t.Errorf("a: PreBind work left after Unreserve")
	}
	if why := reserveOn(t, f, b, "n1"); why != "" {
		t.Errorf("b on n1 after a was unreserved: %q", why)
	}
	plain := with(pod("plain", "", nil, nil), hostPort(8080)) // concerned, no claims
	if why := reserveOn(t, f, plain, "n2"); why != "" {
		t.Fatalf("plain on n2: %q", why)
	}
	if f.PreBinds(plain.UID) {
		t.Errorf("plain: PreBind work for a pod without claims")
	}
	if err := f.PreBind(ctx, plain.UID); err != nil {
		t.Errorf("plain: PreBind: %v", err)
	}
}

// TestExcludeCandidates: the plugins run only on the candidates; a node
// the caller's own measure leaves out is not ruled out by them (whoever
// picks it later checks it again), and its own reason still comes first.
func TestExcludeCandidates(t *testing.T) {
	nodes := three()
	f, _ := fedFilter(t, nodes)
	reserveOn(t, f, with(pod("web-1", "", web, nil), antiAffinity(term("app", "web", hostname))), "n1")
	reserveOn(t, f, with(pod("web-2", "", web, nil), antiAffinity(term("app", "web", hostname))), "n2")
	third := with(pod("web-3", "", web, nil), antiAffinity(term("app", "web", hostname)))
	const refused = "InterPodAffinity: node(s) didn't match pod anti-affinity rules"
	onlyN1 := func(i int) bool { return i == 0 }
	ex, _, concerned, err := f.Exclude(context.Background(), third, nodes, nil, onlyN1)
	if err != nil || !concerned {
		t.Fatalf("concerned %v, err %v", concerned, err)
	}
	for i, want := range []string{refused, "", ""} {
		if got := ex(i); got != want {
			t.Errorf("%s: %q, want %q", nodes[i].Name, got, want)
		}
	}
	// The pick of an unchecked node is checked when it is reserved.
	if why := reserveOn(t, f, third, "n2"); why != refused {
		t.Errorf("web-3 reserved on n2 beside web-2: %q, want %q", why, refused)
	}
}
