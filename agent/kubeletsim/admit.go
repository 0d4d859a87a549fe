package kubeletsim

import (
	"context"
	"fmt"
	"sort"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// AdmitOptions changes how the stand-in chooses devices.
type AdmitOptions struct {
	// IgnorePreferred makes the stand-in pick devices itself, highest ID
	// first, as kubelet does when a preference is unusable.
	IgnorePreferred bool
}

// Admit admits one pod the way kubelet does: the pod becomes active, then
// each container that requests the resource gets devices and an Allocate
// call, in order. On an error the pod is rejected (no longer active, its
// devices released) and the error is what kubelet would put in the pod's
// UnexpectedAdmissionError event.
func (k *Kubelet) Admit(ctx context.Context, pod Pod, opt AdmitOptions) (map[string]*Allocation, error) {
	k.admitMu.Lock()
	defer k.admitMu.Unlock()
	k.stateMu.Lock()
	if _, dup := k.active[pod.key()]; dup {
		k.stateMu.Unlock()
		return nil, fmt.Errorf("kubeletsim: pod %s is already active", pod.key())
	}
	k.active[pod.key()] = pod
	k.order = append(k.order, pod.key())
	k.stateMu.Unlock()
	out := map[string]*Allocation{}
	for _, c := range pod.ordered() {
		if c.Devices == 0 {
			continue
		}
		a, err := k.allocate(ctx, pod, c, opt)
		if err != nil {
			k.Remove(pod.Namespace, pod.Name)
			return nil, fmt.Errorf("admission of %s failed: Allocate failed due to %w, which is unexpected", pod.key(), err)
		}
		out[c.Name] = a
	}
	return out, nil
}

func (k *Kubelet) allocate(ctx context.Context, pod Pod, c Container, opt AdmitOptions) (*Allocation, error) {
	p, err := k.currentPlugin()
	if err != nil {
		return nil, err
	}
	ids, err := k.chooseDevices(ctx, p, pod, c, opt)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, fmt.Errorf("kubeletsim: plugin answered %d container responses, want 1", len(resp.ContainerResponses))
	}
	cr := resp.ContainerResponses[0]
	a := &Allocation{DeviceIDs: ids, Envs: cr.Envs, Mounts: map[string]string{}, ReadOnly: map[string]bool{}}
	for _, m := range cr.Mounts {
		a.Mounts[m.ContainerPath] = m.HostPath
		if m.ReadOnly {
			a.ReadOnly[m.ContainerPath] = true
		}
	}
	for _, d := range cr.CdiDevices {
		a.CDI = append(a.CDI, d.Name)
	}
	k.stateMu.Lock()
	defer k.stateMu.Unlock()
	if k.podDevices[pod.key()] == nil {
		k.podDevices[pod.key()] = map[string]*Allocation{}
	}
	k.podDevices[pod.key()][c.Name] = a
	return a, nil
}

// chooseDevices picks and reserves devices under the device lock, asking
// the plugin for a preference as kubelet does.
func (k *Kubelet) chooseDevices(ctx context.Context, p *plugin, pod Pod, c Container, opt AdmitOptions) ([]string, error) {
	k.devLock.Lock()
	k.setLockHeld(true)
	defer func() {
		k.setLockHeld(false)
		k.devLock.Unlock()
	}()
	k.stateMu.Lock()
	free := k.freeLocked()
	k.stateMu.Unlock()
	if len(free) < c.Devices {
		return nil, fmt.Errorf("kubeletsim: requested number of devices unavailable for %s. Requested: %d, Available: %d", k.resource, c.Devices, len(free))
	}
	var ids []string
	if p.opts.GetPreferredAllocationAvailable && !opt.IgnorePreferred {
		resp, err := p.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: free, AllocationSize: int32(c.Devices),
		}}})
		if err != nil {
			return nil, err
		}
		if len(resp.ContainerResponses) == 1 && subset(resp.ContainerResponses[0].DeviceIDs, free) && len(resp.ContainerResponses[0].DeviceIDs) == c.Devices {
			ids = resp.ContainerResponses[0].DeviceIDs
		}
	}
	if ids == nil {
		sort.Sort(sort.Reverse(sort.StringSlice(free)))
		ids = free[:c.Devices]
	}
	k.stateMu.Lock()
	for _, id := range ids {
		k.inUse[id] = pod.key()
	}
	k.stateMu.Unlock()
	return append([]string(nil), ids...), nil
}

func (k *Kubelet) setLockHeld(v bool) {
	k.stateMu.Lock()
	k.lockHeld = v
	k.stateMu.Unlock()
}

// Start starts the pod's containers: PreStartContainer for each container
// holding devices when the plugin requires it. kubelet calls it again on
// every container restart.
func (k *Kubelet) Start(ctx context.Context, namespace, name string) error {
	k.stateMu.Lock()
	pod, ok := k.active[namespace+"/"+name]
	allocs := k.podDevices[namespace+"/"+name]
	k.stateMu.Unlock()
	if !ok {
		return fmt.Errorf("kubeletsim: pod %s/%s is not active", namespace, name)
	}
	p, err := k.currentPlugin()
	if err != nil {
		return err
	}
	if !p.opts.PreStartRequired {
		return nil
	}
	for _, c := range pod.ordered() {
		a := allocs[c.Name]
		if a == nil {
			continue
		}
		if _, err := p.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: a.DeviceIDs}); err != nil {
			return fmt.Errorf("container %s: device plugin PreStartContainer rpc failed with err: %w", c.Name, err)
		}
	}
	return nil
}

// Remove ends a pod: it is no longer active and its devices are free.
func (k *Kubelet) Remove(namespace, name string) {
	key := namespace + "/" + name
	k.stateMu.Lock()
	defer k.stateMu.Unlock()
	delete(k.active, key)
	delete(k.podDevices, key)
	for i, o := range k.order {
		if o == key {
			k.order = append(k.order[:i:i], k.order[i+1:]...)
			break
		}
	}
	for id, owner := range k.inUse {
		if owner == key {
			delete(k.inUse, id)
		}
	}
}

// Allocations returns what each container of a pod holds.
func (k *Kubelet) Allocations(namespace, name string) map[string]*Allocation {
	k.stateMu.Lock()
	defer k.stateMu.Unlock()
	out := map[string]*Allocation{}
	for c, a := range k.podDevices[namespace+"/"+name] {
		out[c] = a
	}
	return out
}

func subset(ids, of []string) bool {
	in := map[string]bool{}
	for _, id := range of {
		in[id] = true
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !in[id] || seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}
