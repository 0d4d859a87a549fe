package kube

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/tessera-gpu/tessera/agent/deviceplugin"
	"github.com/tessera-gpu/tessera/agent/handoff"
)

// DefaultPodResourcesSocket is where kubelet serves its PodResources API.
const DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// PodResources reads kubelet's PodResources API: which devices each
// container of each active pod holds.
type PodResources struct {
	conn     *grpc.ClientConn
	resource string
	timeout  time.Duration
}

// NewPodResources returns a client of the socket at path for resource.
// Connections are made lazily, so kubelet may come and go.
func NewPodResources(path, resource string) (*PodResources, error) {
	conn, err := deviceplugin.Dial(path)
	if err != nil {
		return nil, fmt.Errorf("pod resources: %w", err)
	}
	return &PodResources{conn: conn, resource: resource, timeout: 5 * time.Second}, nil
}

// Close closes the connection.
func (p *PodResources) Close() error { return p.conn.Close() }

// List returns kubelet's active pods with their devices of the resource.
func (p *PodResources) List(ctx context.Context) ([]handoff.KubeletPod, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(p.conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet pod resources: list: %w", err)
	}
	out := make([]handoff.KubeletPod, 0, len(resp.PodResources))
	for _, pr := range resp.PodResources {
		kp := handoff.KubeletPod{Namespace: pr.Namespace, Name: pr.Name, Devices: map[string][]string{}}
		for _, c := range pr.Containers {
			kp.Devices[c.Name] = nil // listed, maybe without devices
			for _, d := range c.Devices {
				if d.ResourceName == p.resource {
					kp.Devices[c.Name] = append(kp.Devices[c.Name], d.DeviceIds...)
				}
			}
		}
		out = append(out, kp)
	}
	return out, nil
}
