package nodeinventory

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/inventory"
)

// idle is how long a cached node inventory is kept without being
// asked for. A snapshot kept across cycles (the scheduler's snapshot) asks only for
// the nodes whose object changed, and for every node when it is built
// again (after a failed cycle): entries of unchanged nodes go idle too,
// and such a rebuild after a quiet spell reads their labels again.
const idle = time.Minute

// Cache remembers a Source's answer per node object version
// (UID and resourceVersion), for a source whose answer depends on the Node
// object alone, such as Labels: when every cycle rebuilt its
// snapshot from every node, re-reading unchanged nodes was about half of
// the scheduler's allocations at 5,000 nodes (rebuilds are rarer now).
// What it returns shares its GPU and link lists with the cache: callers
// read it and never change it (the snapshot only reads its inventories;
// copying them cost a quarter of the allocations again). Safe for
// concurrent use.
type Cache struct {
	src Source

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

// NewCache is a cache of src's answers.
func NewCache(src Source) *Cache {
	return &Cache{src: src, entries: map[string]nodeCacheEntry{}}
}

// Version implements Versioned: the cache answers from the Node object
// alone.
func (c *Cache) Version(n *corev1.Node) (Version, bool) { return nodeVersion(n) }

// Node implements Source.
func (c *Cache) Node(n *corev1.Node) (inventory.Node, error) {
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
	if now.Sub(c.swept) > idle {
		for name, old := range c.entries {
			if now.Sub(old.used) > idle {
				delete(c.entries, name)
			}
		}
		c.swept = now
	}
	return e.node, e.err
}
