package scheduler

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/inventory"
)

// inventoryIdle is how long a cached node inventory is kept without being
// asked for. A snapshot kept across cycles (snapshot.go) asks only for
// the nodes whose object changed, and for every node when it is built
// again (after a failed cycle): entries of unchanged nodes go idle too,
// and such a rebuild after a quiet spell reads their labels again.
const inventoryIdle = time.Minute

// nodeCache remembers an InventorySource's answer per node object version
// (UID and resourceVersion), for a source whose answer depends on the Node
// object alone, such as LabelInventory: when every cycle rebuilt its
// snapshot from every node, re-reading unchanged nodes was about half of
// the scheduler's allocations at 5,000 nodes (rebuilds are rarer now).
// What it returns shares its GPU and link lists with the cache: callers
// read it and never change it (the snapshot only reads its inventories;
// copying them cost a quarter of the allocations again). Safe for
// concurrent use.
type nodeCache struct {
	src InventorySource

	mu      sync.Mutex
	entries map[string]nodeCacheEntry // by node name
	swept   time.Time
}

type nodeCacheEntry struct {
	uid  types.UID
	rv   string
	node inventory.Node
	err  error
	used time.Time
}

func newNodeCache(src InventorySource) *nodeCache {
	return &nodeCache{src: src, entries: map[string]nodeCacheEntry{}}
}

// version implements versionedSource: the cache answers from the Node
// object alone.
func (c *nodeCache) version(n *corev1.Node) (inventoryVersion, bool) { return nodeVersion(n) }

// Node implements InventorySource.
func (c *nodeCache) Node(n *corev1.Node) (inventory.Node, error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[n.Name]
	if !ok || e.uid != n.UID || e.rv != n.ResourceVersion || n.ResourceVersion == "" {
		node, err := c.src.Node(n)
		e = nodeCacheEntry{uid: n.UID, rv: n.ResourceVersion, node: node, err: err}
	}
	e.used = now
	c.entries[n.Name] = e
	if now.Sub(c.swept) > inventoryIdle {
		for name, old := range c.entries {
			if now.Sub(old.used) > inventoryIdle {
				delete(c.entries, name)
			}
		}
		c.swept = now
	}
	return e.node, e.err
}
