package scheduler

import (
	"context"

	"github.com/tessera-gpu/tessera/kube/leader"
)

// RunWithLeaderElection runs the scheduler only while this replica holds
// the lease (package kube/leader; default kube-system/tessera-scheduler).
// Losing the lease stops scheduling and returns an error, so the process
// exits and restarts as a follower. It returns nil when ctx ends.
func (s *Scheduler) RunWithLeaderElection(ctx context.Context, le leader.Config) error {
	if le.Namespace == "" {
		le.Namespace = "kube-system"
	}
	if le.Name == "" {
		le.Name = "tessera-scheduler"
	}
	return leader.Run(ctx, s.cfg.Client, le, s.cfg.Log, s.Run)
}
