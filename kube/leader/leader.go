package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config configures running several replicas with one active.
type Config struct {
	// Namespace and Name locate the Lease object; required.
	Namespace, Name string
	// Identity names this replica (e.g. the pod name); required.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod follow client-go's
	// meaning (defaults 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Run runs run only while this replica holds the lease, logging to log.
// Losing the lease cancels run's context and returns an error, so the
// process exits and restarts as a follower (the standard pattern: a replica
// never resumes mid-work with a stale view). It returns run's error, or
// nil when ctx ends.
func Run(ctx context.Context, c kubernetes.Interface, le Config, log *slog.Logger, run func(context.Context) error) error {
	if le.Identity == "" {
		return errors.New("leader election: identity is required")
	}
	if le.Namespace == "" || le.Name == "" {
		return errors.New("leader election: the Lease's namespace and name are required")
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration, le.RenewDeadline, le.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if le.RenewDeadline >= le.LeaseDuration || le.RetryPeriod >= le.RenewDeadline {
		return fmt.Errorf("leader election: need retry period (%v) < renew deadline (%v) < lease duration (%v)", le.RetryPeriod, le.RenewDeadline, le.LeaseDuration)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     c.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	// The callbacks run on the elector's goroutines: hand results over
	// through channels, not shared variables.
	started := make(chan struct{})
	done := make(chan error, 1)
	lost := make(chan struct{}, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		ReleaseOnCancel: true, Name: le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				close(started)
				log.Info("became leader", "identity", le.Identity)
				done <- run(lctx)
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost <- struct{}{}
					log.Warn("lost leadership", "identity", le.Identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(ctx) // returns when ctx ends or the lease is lost; the leader's context is then cancelled
	var runErr error
	select {
	case <-started:
		runErr = <-done
	default:
	}
	select {
	case <-lost:
		return errors.New("leader election: lost the lease; restart to rejoin as a follower")
	default:
	}
	return runErr
}
