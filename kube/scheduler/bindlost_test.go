package scheduler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// TestFailedBindingThatApplied: when a binding's answer is lost although
// the API server applied it (the server was killed mid-request; the
// chaos test's seed 4 over-committed a GPU this way), the pod must stay
// booked on its node until the informer shows it bound, so the next pod
// does not get its GPU; a binding that really failed frees the GPU.
func TestFailedBindingThatApplied(t *testing.T) {
	for _, tc := range []struct {
		name string
		// bind runs on the fake API server instead of the binding; it
		// returns the binding's error.
		bind        func(t *testing.T, c *fake.Clientset, pod *corev1.Pod, b *corev1.Binding) error
		getFailures int // reads of the pod that fail before one answers
		wantNode    string
	}{
		{name: "answer lost after the binding applied", bind: applyThenLose, wantNode: "n"},
		{name: "answer lost, then the API server is unreachable for a while", bind: applyThenLose, getFailures: 2, wantNode: "n"},
		{name: "refused: an earlier attempt bound it", bind: func(t *testing.T, c *fake.Clientset, pod *corev1.Pod, b *corev1.Binding) error {
			if err := applyThenLose(t, c, pod, b); err == nil {
				t.Fatal("applyThenLose returned no error")
			}
			return apierrors.NewConflict(corev1.Resource("pods/binding"), pod.Name, errors.New("pod is already assigned to node \"n\""))
		}, wantNode: "n"},
		{name: "failed before it applied", bind: func(*testing.T, *fake.Clientset, *corev1.Pod, *corev1.Binding) error {
			return errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}},
		{name: "pod deleted meanwhile", bind: func(t *testing.T, c *fake.Clientset, pod *corev1.Pod, _ *corev1.Binding) error {
			if err := c.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), pod.Namespace, pod.Name); err != nil {
				t.Fatal(err)
			}
			return errors.New("read: connection reset by peer")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := labelNode("n", "1", "H200")
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			a, b := wholeGPUPod("a"), wholeGPUPod("b")
			client := fake.NewClientset(node, a.DeepCopy(), b.DeepCopy())
			client.PrependReactor("create", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
				if act.GetSubresource() != "binding" {
					return false, nil, nil
				}
				bnd := act.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
				return true, nil, tc.bind(t, client, a, bnd)
			})
			failures := tc.getFailures
			client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				if failures == 0 {
					return false, nil, nil
				}
				failures--
				return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
			})
			s, err := New(Config{Client: client, Catalog: catalogtest.Small(), DisablePreemption: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			inv := nodeinventory.Labels{Catalog: catalogtest.Small()}
			snap := buildSnapshot(s.cfg.Log, inv, []*corev1.Node{node}, nil)
			pl, o, msg := s.planPod(snap, a)
			if o != outcomeBound {
				t.Fatalf("plan a: %v %s", o, msg)
			}
			s.bookAndCommit(ctx, t, snap, a, pl) // no binder outside Run: binds inline

			// The next cycle, before the informer shows a bound: a is still
			// pending in the informer's view; the binding's report is taken in.
			s.takeReports(snap)
			var assumed []*corev1.Pod
			gotNode := ""
			if p, ok := s.assumed[a.Namespace+"/"+a.Name]; ok {
				assumed = append(assumed, p)
				gotNode = p.Spec.NodeName
			}
			if gotNode != tc.wantNode {
				t.Fatalf("after the failed binding, a is assumed on %q, want %q", gotNode, tc.wantNode)
			}
			next := buildSnapshot(s.cfg.Log, inv, []*corev1.Node{node}, assumed)
			_, o, msg = s.planPod(next, b)
			if fits := o == outcomeBound; fits != (tc.wantNode == "") {
				t.Errorf("pod b fits: %v (%s), want %v: node n's only GPU is a's when a is bound", fits, msg, tc.wantNode == "")
			}
		})
	}
}

// applyThenLose binds the pod on the fake API server as the real one does
// (node, and the Binding's annotations copied onto the pod) and loses the
// answer.
func applyThenLose(t *testing.T, c *fake.Clientset, pod *corev1.Pod, b *corev1.Binding) error {
	t.Helper()
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	obj, err := c.Tracker().Get(gvr, pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*corev1.Pod).DeepCopy()
	p.Spec.NodeName = b.Target.Name
	p.Annotations = b.Annotations
	if err := c.Tracker().Update(gvr, p, p.Namespace); err != nil {
		t.Fatal(err)
	}
	return errors.New("read tcp 127.0.0.1:50000->127.0.0.1:6443: read: connection reset by peer")
}

func wholeGPUPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{SchedulerName: DefaultName, Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{workload.ResourceGPU: resource.MustParse("1")}}}}},
	}
}
