package kubeletsim

import (
	"context"
	"errors"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ErrDeadlock is what List answers while the device lock is held: a real
// kubelet would block forever (List takes the device manager lock).
var ErrDeadlock = errors.New("kubeletsim: PodResources List called while kubelet holds its device manager lock (GetPreferredAllocation); a real kubelet deadlocks here")

type podResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	k *Kubelet
}

func (s podResources) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k := s.k
	k.stateMu.Lock()
	defer k.stateMu.Unlock()
	if k.lockHeld {
		return nil, ErrDeadlock
	}
	resp := &podresourcesv1.ListPodResourcesResponse{}
	if k.starting {
		return resp, nil // the pod manager has not re-added the pods yet
	}
	for _, key := range k.order {
		pod := k.active[key]
		pr := &podresourcesv1.PodResources{Namespace: pod.Namespace, Name: pod.Name}
		for _, c := range pod.ordered() {
			if isInit(pod, c) && !c.Restartable {
				continue
			}
			cr := &podresourcesv1.ContainerResources{Name: c.Name}
			if a := k.podDevices[key][c.Name]; a != nil {
				cr.Devices = []*podresourcesv1.ContainerDevices{{ResourceName: k.resource, DeviceIds: append([]string(nil), a.DeviceIDs...)}}
			}
			pr.Containers = append(pr.Containers, cr)
		}
		resp.PodResources = append(resp.PodResources, pr)
	}
	return resp, nil
}

func isInit(p Pod, c Container) bool {
	for _, ic := range p.InitContainers {
		if ic.Name == c.Name {
			return true
		}
	}
	return false
}
