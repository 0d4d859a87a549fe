package scheduler

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
)

// sharingInventory is LabelInventory with every GPU of a node set to the
// sharing mode named by the node's name prefix ("exclusive-0", "mps-1").
type sharingInventory struct{ LabelInventory }

func (s sharingInventory) Node(n *corev1.Node) (inventory.Node, error) {
	in, err := s.LabelInventory.Node(n)
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
	inv := sharingInventory{LabelInventory{Catalog: catalogtest.Small()}}
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
			pl, o, msg := s.plan(snap, pod(tc.gpus, tc.fraction, tc.hostIPC))
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
