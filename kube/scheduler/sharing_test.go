package scheduler

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
)

// sharingInventory is nodeinventory.Labels with every GPU of a node set to the
// sharing mode named by the node's name prefix ("exclusive-0", "mps-1").
type sharingInventory struct{ nodeinventory.Labels }

func (s sharingInventory) Node(n *corev1.Node) (inventory.Node, error) {
	in, err := s.Labels.Node(n)
	mode, _, _ := strings.Cut(n.Name, "-")
	for i := range in.GPUs {
		in.GPUs[i].Sharing = mode
	}
	return in, err
}

// TestSharingModes: exclusive nodes take whole GPUs only and MPS nodes one
// GPU per container; a pod no node's mode allows is left pending with the
// modes among the reasons.
func TestSharingModes(t *testing.T) {
	pol, err := placement.New("spread", placement.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &Scheduler{cfg: Config{Catalog: catalogtest.Small(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, policy: pol, podPolicies: map[string]placement.Policy{}}
	inv := sharingInventory{nodeinventory.Labels{Catalog: catalogtest.Small()}}
	nodes := []*corev1.Node{labelNode("exclusive-0", "4", "H200"), labelNode("mps-0", "4", "H200")}
	for _, n := range nodes {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	snap := buildSnapshot(s.cfg.Log, inv, nodes, nil)
	pod := func(gpus, fraction string, hostIPC bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: map[string]string{}},
			Spec: corev1.PodSpec{HostIPC: hostIPC, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse(gpus)}}}}}}
		if fraction != "" {
			p.Annotations[workload.AnnotationCompute] = fraction
		}
		return p
	}
	for _, tc := range []struct {
		name, gpus, fraction string
		hostIPC              bool
		node, why            string
	}{
		{"fraction goes to the MPS node", "1", "0.5", true, "mps-0", ""},
		{"two whole GPUs go to the exclusive node", "2", "", true, "exclusive-0", ""},
		{"two fractional GPUs fit nowhere", "2", "0.5", true, "", "1 node: GPUs are exclusive (sharing: exclusive): whole GPUs only; 1 node: GPUs are shared through MPS (sharing: mps): one GPU per container"},
		{"a fraction without hostIPC fits nowhere", "1", "0.5", false, "", "1 node: GPUs are shared through MPS (sharing: mps): the pod needs spec.hostIPC: true"},
		{"a whole GPU without hostIPC goes to the exclusive node", "1", "", false, "exclusive-0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, o, msg := s.planPod(snap, pod(tc.gpus, tc.fraction, tc.hostIPC))
			if tc.node != "" {
				if o != outcomeBound || pl.assignment.Node != tc.node {
					t.Fatalf("plan = %v on %q (%s), want %s", o, pl.assignment.Node, msg, tc.node)
				}
				return
			}
			if o != outcomeUnschedulable || !strings.Contains(msg, tc.why) {
				t.Fatalf("plan = %v %q, want unschedulable with %q", o, msg, tc.why)
			}
		})
	}
}

// oversubInventory is nodeinventory.Labels with memory oversubscription on the
// nodes named "oversub-*" (their agent runs with --oversubscribe).
type oversubInventory struct{ nodeinventory.Labels }

func (o oversubInventory) Node(n *corev1.Node) (inventory.Node, error) {
	in, err := o.Labels.Node(n)
	in.MemoryOversubscription = strings.HasPrefix(n.Name, "oversub-")
	return in, err
}

// TestOversubscription: a pod that asks for memory oversubscription
// (nvshare.com/gpu, or tessera.io/oversubscribe) goes only to a node whose
// agent oversubscribes, with nvshare's shares resolved on the chosen GPU (a
// tenth guaranteed, the whole card as the limit); where no node
// oversubscribes it waits, saying so. Other pods go anywhere.
func TestOversubscription(t *testing.T) {
	pol, err := placement.New("spread", placement.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &Scheduler{cfg: Config{Catalog: catalogtest.Small(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, policy: pol, podPolicies: map[string]placement.Policy{}}
	inv := oversubInventory{nodeinventory.Labels{Catalog: catalogtest.Small()}}
	ready := func(nodes ...*corev1.Node) []*corev1.Node {
		for _, n := range nodes {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		}
		return nodes
	}
	pod := func(res string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: ann},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceName(res): resource.MustParse("1")}}}}}}
	}
	m, err := catalogtest.Small().Resolve("H200")
	if err != nil {
		t.Fatal(err)
	}
	h200 := m.MemoryMiB
	mixed := buildSnapshot(s.cfg.Log, inv, ready(labelNode("plain-0", "1", "H200"), labelNode("oversub-0", "1", "H200")), nil)
	plainOnly := buildSnapshot(s.cfg.Log, inv, ready(labelNode("plain-0", "1", "H200"), labelNode("plain-1", "1", "H200")), nil)
	for _, tc := range []struct {
		name  string
		snap  *snapshot
		pod   *corev1.Pod
		node  string // "" when it must wait
		share binding.Share
		why   string
	}{
		{"nvshare goes to the oversubscribing node", mixed, pod(workload.NvshareResourceGPU, nil), "oversub-0",
			binding.Share{ComputeMilli: 100, ComputeLimitMilli: 1000, MemoryMiB: h200 / 10, MemoryLimitMiB: h200}, ""},
		{"tessera.io/oversubscribe goes there too", mixed, pod(workload.ResourceGPU, map[string]string{workload.AnnotationOversubscribe: "true"}), "oversub-0",
			binding.Share{ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: h200, MemoryLimitMiB: h200}, ""},
		{"nvshare waits where no node oversubscribes", plainOnly, pod(workload.NvshareResourceGPU, nil), "", binding.Share{},
			`no node fits 1 GPU(s) at compute 100/1000 for ns/p/main: 2 nodes: agent does not oversubscribe GPU memory (tessera agent --oversubscribe), which the pod asks for (nvshare.com/gpu, or tessera.io/oversubscribe: "true")`},
		{"a pod that does not ask goes anywhere", plainOnly, pod(workload.ResourceNVIDIAGPU, nil), "plain-", binding.Share{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, o, msg := s.planPod(tc.snap, tc.pod)
			if tc.node == "" {
				if o != outcomeUnschedulable || msg != tc.why {
					t.Fatalf("plan = %v %q, want unschedulable with\n%q", o, msg, tc.why)
				}
				return
			}
			if o != outcomeBound || !strings.HasPrefix(pl.assignment.Node, tc.node) {
				t.Fatalf("plan = %v on %q (%s), want %s", o, pl.assignment.Node, msg, tc.node)
			}
			if tc.share.ComputeMilli == 0 {
				return
			}
			got := pl.assignment.Containers[0].GPUs[0]
			got.UUID, got.Index = "", 0
			if got != tc.share {
				t.Errorf("share %+v, want %+v", got, tc.share)
			}
		})
	}
}
