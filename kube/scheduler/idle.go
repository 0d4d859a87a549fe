package scheduler

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/kube/clusterinv"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
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
	since, errs := idleSince(objs, now)
	for _, err := range errs {
		s.cfg.Log.Warn("GPU use ignored for idle reclaim", "err", err)
	}
	return func(id string) time.Time { return since[id] }
}

// idleSince reads, from the nodes' GPUUse objects current at now (not
// older than clusterinv.StaleUse), the pods that are idle holders (every
// share a pod has is marked idle), each with the latest of its shares'
// marks. An object that does not read is left out with its error.
func idleSince(objs []*unstructured.Unstructured, now time.Time) (map[string]time.Time, []error) {
	out := map[string]time.Time{}
	var errs []error
	busy := map[string]bool{}
	for _, u := range objs {
		st, err := nodeuse.FromObject(u)
		if err != nil {
			errs = append(errs, err) // it names the object and the field
			continue
		}
		if now.Sub(st.At) > clusterinv.StaleUse {
			continue // an agent that stopped publishing: its marks may be long out of date
		}
		for _, g := range st.GPUs {
			for _, sh := range g.Shares {
				if sh.Idle == nil {
					busy[sh.Workload] = true
					continue
				}
				if sh.Idle.Since.After(out[sh.Workload]) {
					out[sh.Workload] = sh.Idle.Since
				}
			}
		}
	}
	for pod := range busy {
		delete(out, pod)
	}
	return out, errs
}
