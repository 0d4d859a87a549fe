package scheduler

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestPodMadeAgainUnderItsName: a pod deleted and made again under its
// name before the next cycle is a new pod: the deleted one's booking goes
// (it could otherwise be named as a victim, or keep its GPUs booked), the
// new one waits, and a report of the deleted one's binding changes
// nothing for the new one.
func TestPodMadeAgainUnderItsName(t *testing.T) {
	src := nodeinventory.NewCache(nodeinventory.Labels{Catalog: catalogtest.Small()})
	s := testScheduler(src)
	core, err := dispatch.New(dispatch.Config{InitialBackoff: time.Minute, MaxBackoff: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s.core, s.pending, s.assumed = core, map[string]*corev1.Pod{}, map[string]*corev1.Pod{}
	node := labelNode("a", "1", "H200")
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	old := boundPod("p", "a", &binding.Assignment{Version: binding.Version, Node: "a", Containers: []binding.Container{{Name: "main",
		GPUs: []binding.Share{{UUID: "a/gpu0", Index: 0, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 4096, MemoryLimitMiB: 4096}}}}})
	old.UID, old.Spec.SchedulerName = "old", DefaultName
	snap := s.syncTo(src, []*corev1.Node{node}, []*corev1.Pod{old}, nil)
	if held, _ := snap.books.Has("ns/p"); !held {
		t.Fatal("the bound pod is not booked")
	}

	remade := boundPod("p", "", nil)
	remade.UID, remade.Spec.SchedulerName = "new", DefaultName
	remade.Spec.Containers[0].Resources.Limits = corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}
	s.takePod(snap, remade)
	if held, _ := snap.books.Has("ns/p"); held || snap.pods["ns/p"] != nil {
		t.Fatal("the deleted pod's booking survived its successor of the same name")
	}
	if free := snap.books.Cluster().Nodes[0].GPUs[0].FreeMilli; free != 1000 {
		t.Fatalf("GPU 0 has %d milli free, want 1000 (the deleted pod's share released)", free)
	}
	if s.pending["ns/p"] != remade || core.Len() != 1 {
		t.Fatalf("pending %v, core holds %d; want the new pod waiting", s.pending["ns/p"], core.Len())
	}

	// The deleted pod's binding failed (its UID no longer exists): the new
	// pod is not backed off for it.
	s.inbox.bindEnded(bindReport{id: "ns/p", uid: "old", err: errors.New("precondition failed: UID")})
	s.takeReports(snap)
	if core.BackingOff("ns/p", time.Now()) {
		t.Fatal("the new pod backs off for the deleted pod's failed binding")
	}
}
