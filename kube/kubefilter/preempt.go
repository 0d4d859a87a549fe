package kubefilter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// FitsWithout is kube-scheduler's preemption dry run for pod on node: the
// pods with the victims' UIDs (on that node) are taken off a copy of the
// node, each through the plugins' RemovePod extensions (spread and
// affinity counts), and the plugins filter the pod there. It returns ""
// when the pod would pass every plugin once the victims are gone, else
// the rejection ("Plugin: its message"): a victim set that makes room for
// the pod's GPUs and host resources must make room under these plugins
// too (a required affinity to a victim is never satisfied by stopping
// it). A victim the cache does not hold on the node is passed over: it
// counts for nothing there.
func (f *Filter) FitsWithout(ctx context.Context, pod *corev1.Pod, node string, victims []types.UID) (string, error) {
	if f == nil {
		return "", nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refresh(pod); err != nil {
		return "", err
	}
	p := ForFramework(pod)
	state := framework.NewCycleState()
	if _, st, narrowing := f.fw.RunPreFilterPlugins(ctx, state, p); !st.IsSuccess() {
		if !st.IsRejected() {
			return "", fmt.Errorf("kubefilter: pod %s: %w", key(pod), st.AsError())
		}
		return rejection(st, narrowing).String(), nil
	}
	info, err := f.snapshot.NodeInfos().Get(node)
	if err != nil {
		return Rejection{Plugin: NotInSnapshot, Reasons: []string{err.Error()}}.String(), nil
	}
	ni := info.Snapshot()
	for _, uid := range victims {
		var victim fwk.PodInfo
		for _, pi := range ni.GetPods() {
			if pi.GetPod().UID == uid {
				victim = pi
				break
			}
		}
		if victim == nil {
			continue // not in the cache (yet): it counts for nothing here
		}
		if err := ni.RemovePod(f.logger, victim.GetPod()); err != nil {
			return "", fmt.Errorf("kubefilter: preemption of pod %s on %s: %w", key(pod), node, err)
		}
		if st := f.fw.RunPreFilterExtensionRemovePod(ctx, state, p, victim, ni); !st.IsSuccess() {
			return "", fmt.Errorf("kubefilter: preemption of pod %s on %s: %w", key(pod), node, st.AsError())
		}
	}
	switch st := f.fw.RunFilterPlugins(ctx, state, p, ni); {
	case st.IsSuccess():
		return "", nil
	case st.IsRejected():
		return rejection(st, nil).String(), nil
	default:
		return "", fmt.Errorf("kubefilter: pod %s on node %s: %w", key(pod), node, st.AsError())
	}
}
