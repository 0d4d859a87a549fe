package scheduler

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// nodeMarks collects the names of the nodes that changed, for the next
// update (informer event handlers mark them). Its zero value is ready;
// safe for concurrent use.
type nodeMarks struct {
	mu    sync.Mutex
	names map[string]bool
}

// mark records that the node named by obj (a Node, a GPUNode, or a
// deleted one's tombstone) changed.
func (m *nodeMarks) mark(obj any) {
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
func (m *nodeMarks) take() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := m.names
	m.names = nil
	if names == nil {
		names = map[string]bool{}
	}
	return names
}
