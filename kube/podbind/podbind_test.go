package podbind

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/binding"
)

func pod(node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}, Spec: corev1.PodSpec{NodeName: node}}
}

func TestBindCarriesTheAssignment(t *testing.T) {
	for _, tc := range []struct {
		name, enc string
		wantAnn   bool
	}{{"gpu pod", "v1:whatever", true}, {"host-only pod", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			var got *corev1.Binding
			c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if ca, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "binding" {
					got = ca.GetObject().(*corev1.Binding)
					return true, nil, nil
				}
				return false, nil, nil
			})
			if err := Bind(context.Background(), c, pod(""), "n1", tc.enc); err != nil {
				t.Fatal(err)
			}
			if got == nil || got.Target.Name != "n1" || got.UID != "u1" {
				t.Fatalf("binding = %+v, want target n1 with the pod's UID", got)
			}
			if v, ok := got.Annotations[binding.AnnotationKey]; ok != tc.wantAnn || v != tc.enc {
				t.Fatalf("annotation %q (present %v), want %q (present %v)", v, ok, tc.enc, tc.wantAnn)
			}
		})
	}
}

func TestBindErrorNamesThePodAndNode(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("already bound"))
	})
	err := Bind(context.Background(), c, pod(""), "n1", "")
	if err == nil || !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want a wrapped conflict", err)
	}
	if want := "bind pod ns/p to node n1"; err.Error()[:len(want)] != want {
		t.Fatalf("err = %q, want it to start with %q", err, want)
	}
}

// Settle reads the pod back: bound (the lost answer case), unbound, gone,
// or replaced by a pod of the same name; a read that fails is retried.
func TestSettle(t *testing.T) {
	replaced := pod("n2")
	replaced.UID = "u2"
	for _, tc := range []struct {
		name      string
		stored    *corev1.Pod // nil: gone
		failReads int32
		wantBound bool
	}{
		{"bound after all", pod("n1"), 0, true},
		{"not bound", pod(""), 0, false},
		{"gone", nil, 0, false},
		{"another pod of that name", replaced, 0, false},
		{"bound, read after two failures", pod("n1"), 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.stored != nil {
				objs = append(objs, tc.stored)
			}
			c := fake.NewClientset(objs...)
			var reads atomic.Int32
			c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				if reads.Add(1) <= tc.failReads {
					return true, nil, apierrors.NewServiceUnavailable("down")
				}
				return false, nil, nil
			})
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			cur, bound := Settle(context.Background(), c, log, pod(""), errors.New("lost"))
			if bound != tc.wantBound {
				t.Fatalf("bound = %v, want %v", bound, tc.wantBound)
			}
			if bound && cur.Spec.NodeName != "n1" {
				t.Fatalf("read back on %q, want n1", cur.Spec.NodeName)
			}
			if got := reads.Load(); got != tc.failReads+1 {
				t.Fatalf("%d reads, want %d", got, tc.failReads+1)
			}
		})
	}
}

func TestPoolRunsEveryJobBeforeStop(t *testing.T) {
	p := Start(context.Background(), 3)
	var ran atomic.Int32
	for range 50 {
		p.Submit(func(context.Context) { ran.Add(1) })
	}
	p.Stop()
	if got := ran.Load(); got != 50 {
		t.Fatalf("%d jobs ran before Stop returned, want 50", got)
	}
}
