package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/kube/boundpods"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/test/testcluster"
)

// TestMIGOnRealControlPlane: a MIG node (two A100-80GB in MIG mode, GPU 0
// managed by Tessera and empty, GPU 1 with a fixed 3g.40gb at slice 4)
// and a plain node (two H100 not in MIG mode), published as GPUNode
// objects through the real API server. MIG pods (tessera.io/mig-profile)
// land on the MIG node only, each on its own instance: the 3g.40gb takes
// the existing instance, the 1g.10gb pods get instances to create at
// distinct start slots of the managed GPU; a fractional pod lands on the
// plain node. A restarted scheduler books the bound instances again and
// places a new MIG pod beside them, never on a slot in use.
func TestMIGOnRealControlPlane(t *testing.T) {
	ctx, _, cfg := testcluster.ForTest(t, true)
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	createGPUNode(ctx, t, client, "mig-0", nil)
	createGPUNode(ctx, t, client, "plain-0", nil)
	if err := gpunode.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	cat := catalog.Default()
	migNodes, err := simulated.Parse([]byte(`nodes: [{name: mig-0, gpus: 2xA100-80GB, overrides: [{index: 0, migManaged: true}, {index: 1, migInstances: [3g.40gb@4]}]}]`), cat)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := simulated.FromSpec("2xH100", cat)
	if err != nil {
		t.Fatal(err)
	}
	plainNodes, _ := plain.Discover(ctx)
	plainNodes[0].Name = "plain-0"
	for _, n := range []string{"mig-0", "plain-0"} {
		inv := migNodes[0]
		if n == "plain-0" {
			inv = plainNodes[0]
		}
		if _, err := dyn.Resource(gpunode.Resource()).Create(ctx, gpunode.Object(inv, 16, gpunode.SharingShared), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	managed, static := migNodes[0].GPUs[0].UUID, migNodes[0].GPUs[1]
	waitFor(t, "nodes Ready", func() error {
		for _, name := range []string{"mig-0", "plain-0"} {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !ready(n) {
				return fmt.Errorf("node %s not ready (%v)", name, err)
			}
		}
		return nil
	})

	stop := startScheduler(ctx, t, client, dyn, nil)
	mig := func(profile string) map[string]string {
		return map[string]string{workload.AnnotationMIGProfile: profile}
	}
	createPod(ctx, t, client, "mig-3g", "1", mig("3g.40gb"))
	for i := 0; i < 3; i++ {
		createPod(ctx, t, client, fmt.Sprintf("mig-1g-%d", i), "1", mig("1g.10gb"))
	}
	createPod(ctx, t, client, "frac", "1", map[string]string{workload.AnnotationCompute: "0.5"})
	waitFor(t, "MIG and fractional pods bound", func() error {
		if err := countBound(ctx, client, "mig-", 4); err != nil {
			return err
		}
		return countBound(ctx, client, "frac", 1)
	})
	if n := nodeOfPod(ctx, t, client, "frac"); n != "plain-0" {
		t.Errorf("fractional pod on %s, want plain-0 (the MIG node's GPUs take MIG requests only)", n)
	}
	slots := map[[2]string]string{}
	check := func(name string) binding.Share {
		t.Helper()
		if n := nodeOfPod(ctx, t, client, name); n != "mig-0" {
			t.Fatalf("%s on %s, want mig-0", name, n)
		}
		s := migShareOf(ctx, t, client, name)
		if s.MIG == nil {
			t.Fatalf("%s share %+v has no MIG placement", name, s)
		}
		key := [2]string{s.MIG.GPU, fmt.Sprint(s.MIG.Start)}
		if other, dup := slots[key]; dup {
			t.Fatalf("%s and %s both hold GPU %s slice %d", name, other, s.MIG.GPU, s.MIG.Start)
		}
		slots[key] = name
		return s
	}
	if s := check("mig-3g"); s.UUID != static.MIGInstances[0].UUID || s.MIG.Create || s.MIG.Start != 4 || s.MIG.GPU != static.UUID {
		t.Errorf("3g.40gb share %+v (mig %+v), want the existing instance %s at 4", s, s.MIG, static.MIGInstances[0].UUID)
	}
	for i := 0; i < 3; i++ {
		s := check(fmt.Sprintf("mig-1g-%d", i))
		if s.MIG.GPU != managed || !s.MIG.Create || s.UUID != managed || s.MIGProfile != "1g.10gb" {
			t.Errorf("1g.10gb share %+v (mig %+v), want an instance to create on the managed GPU %s", s, s.MIG, managed)
		}
	}

	// Restart: the new scheduler rebuilds the bookings from the pods.
	stop()
	createPod(ctx, t, client, "mig-1g-3", "1", mig("1g.10gb"))
	stop = startScheduler(ctx, t, client, dyn, nil)
	defer stop()
	waitFor(t, "MIG pod bound after restart", func() error { return countBound(ctx, client, "mig-", 5) })
	check("mig-1g-3")
	time.Sleep(time.Second) // a few more cycles: nothing may move
	if err := countBound(ctx, client, "mig-", 5); err != nil {
		t.Fatal(err)
	}
}

func nodeOfPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) string {
	t.Helper()
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Spec.NodeName
}

// migShareOf is the single share of pod name's assignment.
func migShareOf(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) binding.Share {
	t.Helper()
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := boundpods.Assignment(p)
	if err != nil || a == nil || len(a.Containers) != 1 || len(a.Containers[0].GPUs) != 1 {
		t.Fatalf("%s assignment %+v, %v", name, a, err)
	}
	return a.Containers[0].GPUs[0]
}
