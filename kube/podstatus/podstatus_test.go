package podstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tessera-gpu/tessera/test/testcluster"
)

// gatedPatches records the PodScheduled patches a fake client receives,
// each held until the test lets it through.
type gatedPatches struct {
	mu      sync.Mutex
	log     []string // "pod: message" per patch, in the order written
	arrived chan string
	release chan struct{}
}

func newGatedPatches(c *fake.Clientset) *gatedPatches {
	g := &gatedPatches{arrived: make(chan string, 100), release: make(chan struct{}, 100)}
	c.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		var body struct {
			Status struct {
				Conditions []struct{ Message string } `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &body); err != nil || len(body.Status.Conditions) != 1 {
			return true, nil, err
		}
		what := pa.GetName() + ": " + body.Status.Conditions[0].Message
		g.arrived <- what
		<-g.release
		g.mu.Lock()
		g.log = append(g.log, what)
		g.mu.Unlock()
		return true, &corev1.Pod{}, nil
	})
	return g
}

func (g *gatedPatches) next(t *testing.T) string {
	t.Helper()
	select {
	case what := <-g.arrived:
		return what
	case <-time.After(time.Minute): // liveness bound only
		t.Fatal("no condition write arrived")
		return ""
	}
}

func (g *gatedPatches) written() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.log)
}

// gatedSink is an event sink (not started) on a fake client holding pods
// a, b and c, whose condition patches wait on the gate.
func gatedSink() (*Sink, *gatedPatches, *fake.Clientset, [3]*corev1.Pod) {
	var pods [3]*corev1.Pod
	for i, name := range []string{"a", "b", "c"} {
		pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("u-" + name)}}
	}
	client := fake.NewClientset(pods[0], pods[1], pods[2])
	gate := newGatedPatches(client)
	return New(client, client, "test", slog.New(slog.NewTextHandler(io.Discard, nil))), gate, client, pods
}

// TestConditionWritesLeaveTheCycle: once started, the sink's reject
// returns while the pod's condition write is still waiting on the API;
// decisions made meanwhile for one pod are coalesced into its latest; a
// pod about to be bound loses its queued write (settle), and settle waits
// for a write in flight, so no PodScheduled=False lands after a binding.
func TestConditionWritesLeaveTheCycle(t *testing.T) {
	e, gate, _, pods := gatedSink()
	a, b, c := pods[0], pods[1], pods[2]
	ctx := context.Background()
	e.Start(ctx, 1)
	defer e.Stop()

	// The single writer is held on a's first condition; reject returned.
	e.Reject(ctx, a, corev1.PodReasonUnschedulable, "gang g: 1 of 4 members exist")
	if got := gate.next(t); got != "a: gang g: 1 of 4 members exist" {
		t.Fatalf("first write %q", got)
	}
	// While it is held: two newer decisions on a, one on b, then b is
	// about to be bound.
	e.Reject(ctx, a, corev1.PodReasonUnschedulable, "gang g: 2 of 4 members exist")
	e.Reject(ctx, a, corev1.PodReasonUnschedulable, "gang g: 3 of 4 members exist")
	e.Reject(ctx, b, corev1.PodReasonUnschedulable, "no node fits")
	e.Settle(ctx, b.UID)
	gate.release <- struct{}{}
	if got := gate.next(t); got != "a: gang g: 3 of 4 members exist" {
		t.Fatalf("second write %q, want a's latest message only", got)
	}
	// c's write is taken while a's second is held; settle on c must
	// wait for it.
	e.Reject(ctx, c, corev1.PodReasonUnschedulable, "no node fits")
	gate.release <- struct{}{}
	if got := gate.next(t); got != "c: no node fits" {
		t.Fatalf("third write %q (b's was dropped by settle)", got)
	}
	settled := make(chan struct{})
	go func() {
		e.Settle(ctx, c.UID)
		close(settled)
	}()
	select {
	case <-settled:
		t.Fatal("settle returned while c's condition write was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	gate.release <- struct{}{}
	<-settled
	want := []string{"a: gang g: 1 of 4 members exist", "a: gang g: 3 of 4 members exist", "c: no node fits"}
	if got := gate.written(); !slices.Equal(got, want) {
		t.Errorf("written %q, want %q", got, want)
	}
	// The same decision again writes nothing; a new one does.
	e.Reject(ctx, c, corev1.PodReasonUnschedulable, "no node fits")
	e.Reject(ctx, c, corev1.PodReasonUnschedulable, "still no node fits")
	if got := gate.next(t); got != "c: still no node fits" {
		t.Fatalf("fourth write %q", got)
	}
	gate.release <- struct{}{}
}

// TestConditionWritesUnstartedAreSynchronous: a sink that was not started
// (cycles driven by hand) writes the condition before reject returns.
func TestConditionWritesUnstartedAreSynchronous(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u-a"}}
	client := fake.NewClientset(p)
	e := New(client, client, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer e.Stop()
	e.Reject(context.Background(), p, corev1.PodReasonUnschedulable, "no node fits")
	got, err := client.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Message != "no node fits" {
		t.Errorf("conditions %+v, want PodScheduled=False with the message", got.Status.Conditions)
	}
}

// TestWaitingGangMembersAreReportedAfterTheGrace: a pod whose gang is
// still missing members is reported only once gangWaitGrace has passed,
// with its latest message and once; a member bound within the grace is
// never reported; a rejection for another reason is written at once.
func TestWaitingGangMembersAreReportedAfterTheGrace(t *testing.T) {
	e, gate, client, pods := gatedSink()
	a, b, c := pods[0], pods[1], pods[2]
	clk := clocktesting.NewFakeClock(time.Now())
	e.clock = clk
	ctx := context.Background()
	e.Start(ctx, 2)
	defer e.Stop()

	e.Waiting(ctx, a, corev1.PodReasonUnschedulable, "gang g: 1 of 4 members exist")
	e.Waiting(ctx, b, corev1.PodReasonUnschedulable, "gang g: 2 of 4 members exist")
	e.Waiting(ctx, a, corev1.PodReasonUnschedulable, "gang g: 2 of 4 members exist")
	e.Settle(ctx, b.UID) // b is bound within the grace
	e.Reject(ctx, c, corev1.PodReasonUnschedulable, "no node fits")
	if got := gate.next(t); got != "c: no node fits" {
		t.Fatalf("first write %q, want c's rejection at once", got)
	}
	gate.release <- struct{}{}
	// The grace has not passed: nothing else is written.
	clk.Step(gangWaitGrace / 2)
	select {
	case got := <-gate.arrived:
		t.Fatalf("%q written within the grace", got)
	case <-time.After(100 * time.Millisecond):
	}
	clk.Step(gangWaitGrace)
	if got := gate.next(t); got != "a: gang g: 2 of 4 members exist" {
		t.Fatalf("after the grace %q, want a's latest message", got)
	}
	gate.release <- struct{}{}
	clk.Step(10 * gangWaitGrace)
	select {
	case got := <-gate.arrived:
		t.Fatalf("%q written after a's (b was bound, a written once)", got)
	case <-time.After(100 * time.Millisecond):
	}
	// The event went with the condition: c's at once and a's after the
	// grace, none for b.
	testcluster.Eventually(t, "the events recorded", time.Minute, func() error {
		evs, err := client.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, ev := range evs.Items {
			got = append(got, ev.InvolvedObject.Name+": "+ev.Message)
		}
		slices.Sort(got)
		if want := []string{"a: gang g: 2 of 4 members exist", "c: no node fits"}; !slices.Equal(got, want) {
			return fmt.Errorf("events %q, want %q", got, want)
		}
		return nil
	})
}
