package scheduler

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// marks collects the keys of the objects that changed (nodes by name,
// pods by namespace/name) for the next cycle: informer event handlers
// mark them, so that a cycle looks at what changed, not at every object.
// Its zero value is ready; safe for concurrent use.
type marks struct {
	mu    sync.Mutex
	names map[string]bool
}

// mark records that the object obj (or a deleted one's tombstone)
// names changed (a GPUNode names its node).
func (m *marks) mark(obj any) {
	name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names == nil {
		m.names = map[string]bool{}
	}
	m.names[name] = true
}

// take returns the names marked since the last take (never nil).
func (m *marks) take() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := m.names
	m.names = nil
	if names == nil {
		names = map[string]bool{}
	}
	return names
}
