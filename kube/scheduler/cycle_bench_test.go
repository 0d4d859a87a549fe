package scheduler

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// BenchmarkCycleEngine is the engine's part of one scheduling cycle with
// one pending pod (a 1-GPU pod), as serve does it on the kept snapshot:
// the pod's workload, the running set and queue usage from the bookings,
// and cycle.Run. 5,000 nodes of 8 GPUs, 2,000 bound pods; "notready"
// leaves 1% of the nodes out (not Ready), as a cordon or a taint would.
// The cluster fills as the pods are placed (each iteration books one).
//
//	go test ./kube/scheduler -run '^$' -bench BenchmarkCycleEngine -benchmem
func BenchmarkCycleEngine(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, notReady := range []int{0, 50} {
		b.Run(fmt.Sprintf("notready=%d", notReady), func(b *testing.B) {
			src := nodeinventory.NewCache(nodeinventory.Labels{Catalog: catalogtest.Small()})
			w := &cacheWorld{rng: rand.New(rand.NewPCG(1, 2)), nodes: map[string]*corev1.Node{}, pods: map[types.UID]*corev1.Pod{}}
			var names []string
			for i := range 5000 {
				name := fmt.Sprintf("n%04d", i)
				w.nodes[name] = w.node(name, 8)
				w.nodes[name].Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("64")
				names = append(names, name)
			}
			slices.Sort(names)
			for i := range notReady {
				w.nodes[names[i*100]].Status.Conditions[0].Status = corev1.ConditionFalse
			}
			for range 2000 {
				p := w.pod(names[w.rng.IntN(len(names))], w.rng.IntN(8), 250)
				w.pods[p.UID] = p
			}
			nodes, pods := w.lists()
			snap := buildSnapshot(log, src, nodes, pods)
			def, err := placement.New(placement.DefaultPolicy, placement.Options{})
			if err != nil {
				b.Fatal(err)
			}
			s := &Scheduler{cfg: Config{Catalog: catalogtest.Small(), Name: DefaultName, Log: log}, policy: def}
			tree, err := queueing.NewTree(nil)
			if err != nil {
				b.Fatal(err)
			}
			gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}
			n := 0
			for b.Loop() {
				n++
				pod := &corev1.Pod{Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main", Resources: gpu}}}}
				pod.Namespace, pod.Name, pod.UID = "default", fmt.Sprintf("q%d", n), types.UID(fmt.Sprintf("q%d", n))
				wl, _, err := s.workloadOf(snap, pod)
				if err != nil {
					b.Fatal(err)
				}
				gangs := map[string]dispatch.GangSpec{}
				s.runningGangs(snap, gangs)
				running := snap.books.Running()
				outs, err := cycle.Run(cycle.Snapshot{Cluster: snap.cluster, Policy: s.policy, Queues: tree, Usage: snap.books.Usage(),
					Capacity: snap.capacity, Gangs: cycleGangs(gangs), Pending: []cycle.Workload{wl}, Running: running})
				if err != nil || len(outs) != 1 || outs[0].Status != cycle.Placed {
					b.Fatalf("cycle: %v %+v", err, outs)
				}
			}
		})
	}
}
