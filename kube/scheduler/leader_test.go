package scheduler

import (
	"context"
	"fmt"

	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/kube/leader"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
)

// TestLeaderFailover runs two replicas with leader election: only the
// leader binds; when it stops, the other takes over and binds new pods.
func TestLeaderFailover(t *testing.T) {
	ctx, client := controlPlane(t)
	createGPUNode(ctx, t, client, "gpu-0", map[string]string{nodeinventory.LabelModel: "H100", nodeinventory.LabelCount: "4"})
	le := leader.Config{Namespace: "default", Name: "tessera-test", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond}
	start := func(id string) (context.CancelFunc, chan error) {
		s, err := New(Config{Client: client, Log: slog.New(slog.NewTextHandler(testWriter{T: t}, nil)), Resync: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		l := le
		l.Identity = id
		go func() { done <- s.RunWithLeaderElection(rctx, l) }()
		return stop, done
	}
	stopA, doneA := start("replica-a")
	waitFor(t, "replica-a leads", func() error { return holder(ctx, client, "replica-a") })
	stopB, doneB := start("replica-b")
	defer func() { stopB(); <-doneB }()
	createPod(ctx, t, client, "first", "1", nil)
	waitFor(t, "first bound", func() error { return countBound(ctx, client, "first", 1) })
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("replica-a: %v", err)
	}
	waitFor(t, "replica-b leads", func() error { return holder(ctx, client, "replica-b") })
	createPod(ctx, t, client, "second", "1", nil)
	waitFor(t, "second bound by the new leader", func() error { return countBound(ctx, client, "second", 1) })
}

func holder(ctx context.Context, c kubernetes.Interface, id string) error {
	l, err := c.CoordinationV1().Leases("default").Get(ctx, "tessera-test", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != id {
		return fmt.Errorf("lease held by %v, want %s", l.Spec.HolderIdentity, id)
	}
	return nil
}
