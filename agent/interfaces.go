package agent

import (
	"context"

	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/binding"
)

// PodSource reads pods bound to the node from the API server.
type PodSource interface {
	// Pod returns one pod; found is false when it does not exist.
	Pod(ctx context.Context, namespace, name string) (pod handoff.Pod, found bool, err error)
	// OnNode returns every pod bound to the node.
	OnNode(ctx context.Context) ([]handoff.Pod, error)
}

// Enforcer makes an allocation's shares real on the node: the node arbiter
// publishes the container's compute grant in dir and gates its launches.
// Register replaces an earlier registration of the same key.
type Enforcer interface {
	Register(ctx context.Context, key, dir string, gpus []binding.Share) error
	Unregister(ctx context.Context, key string) error
}

// MPS is the node arbiter in MPS mode (arbiter.Arbiter, Config.Mode
// ModeMPS): NVIDIA MPS caps each container, which must be started with the
// variables ClientEnv returns for its registered allocation key.
type MPS interface {
	ClientEnv(ctx context.Context, key string) (map[string]string, error)
}

// KubeletPods is kubelet's PodResources API: the active pods and the
// devices their containers hold.
type KubeletPods interface {
	List(ctx context.Context) ([]handoff.KubeletPod, error)
}
