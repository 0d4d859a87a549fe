package scheduler

import (
	"time"

	"github.com/tessera-gpu/tessera/kube/clusterinv"
	"github.com/tessera-gpu/tessera/queueing"
)

// idleMarks is, for a cycle at now, each bound pod's idle mark from the
// nodes' GPUUse objects (dispatch.Frame.IdleSince), or nil, reading no
// GPUUse, unless preemption is on and some queue of tree reclaims idle
// holders. Called with snapMu held (useObjects). The first read starts
// the GPUUse informer and may wait for it (clusterview.UseReader's Wait);
// a failed read marks no pod idle this cycle, and says so.
func (s *Scheduler) idleMarks(tree *queueing.Tree, now time.Time) func(id string) time.Time {
	if s.cfg.DisablePreemption || tree == nil || !tree.IdleReclaims() {
		return nil
	}
	objs, err := s.useObjects()
	if err != nil {
		s.cfg.Log.Warn("reading the nodes' GPU use for idle reclaim: no pod counts as idle this cycle", "err", err)
		return nil
	}
	since, errs := clusterinv.IdleSince(objs, now)
	for _, err := range errs {
		s.cfg.Log.Warn("GPU use ignored for idle reclaim", "err", err)
	}
	return func(id string) time.Time { return since[id] }
}
