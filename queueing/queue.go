package queueing

import (
	"fmt"
	"sort"
	"time"
)

// DefaultQueue is where work that names no queue goes. It exists implicitly
// (no guarantee, weight 1, no limit) unless defined.
const DefaultQueue = "default"

// QueueOr is the queue work naming queue name goes to: DefaultQueue for
// "". Every front door maps a missing queue name with it.
func QueueOr(name string) string {
	if name == "" {
		return DefaultQueue
	}
	return name
}

// MaxDepth bounds the queue hierarchy.
const MaxDepth = 8

// Queue is one node of the queue tree.
type Queue struct {
	Name string `json:"name"`
	// Parent names the parent queue; empty for a top-level queue.
	Parent string `json:"parent,omitempty"`
	// Priority orders queues before fair share: work of a higher-priority
	// queue is tried first.
	Priority int32 `json:"priority,omitempty"`
	// Guaranteed is the quota the queue is entitled to (deserved share).
	Guaranteed Resources `json:"guaranteed"`
	// Weight shares what is left over quota among queues (default 1).
	Weight int32 `json:"weight,omitempty"`
	// Limit is a hard cap on the queue's usage; a zero component means none.
	Limit Resources `json:"limit"`
	// IdleReclaimAfter, when set, lets any waiting workload that needs the
	// room stop a workload of this queue that has held its GPUs idle this
	// long (package preemption's ByIdle); 0: never (the default). In JSON,
	// nanoseconds.
	IdleReclaimAfter time.Duration `json:"idleReclaimAfter,omitempty"`
}

// The range of Queue.IdleReclaimAfter. The floor is well above the idle
// mark's own 10 minutes (gpuuse): a mark says only that compute was near
// zero, and a job loading data, waiting on its CPU preprocessing or on a
// person (a notebook) looks just as idle; stopping one loses its work, so
// the policy must wait far longer than the mark takes to appear. The
// ceiling is a week: longer is "never" in practice, which 0 says.
const (
	MinIdleReclaimAfter = 30 * time.Minute
	MaxIdleReclaimAfter = 168 * time.Hour
)

// checkIdleReclaimAfter checks d against the range; path names the field.
func checkIdleReclaimAfter(path string, d time.Duration) error {
	if d != 0 && (d < MinIdleReclaimAfter || d > MaxIdleReclaimAfter) {
		return fmt.Errorf("%s: must be 0 (off) or in [30m, 168h], got %s", path, d)
	}
	return nil
}

func validName(s string) bool { return ValidName(s) }

// ValidName reports whether s can name a queue: a lowercase DNS label
// (a-z, 0-9, '-', '.', at most 63, starting and ending with a letter or
// digit), as Kubernetes object names are.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 63 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// Tree is a validated set of queues.
type Tree struct {
	queues map[string]*Queue
	kids   map[string][]string
}

// NewTree validates queues: names unique and DNS-like, parents defined, no
// cycles, depth at most MaxDepth, non-negative amounts, weight >= 0 (0 means
// 1), a child's guarantee within its parent's limit, IdleReclaimAfter 0 or
// within its range. The default queue is
// added when missing.
func NewTree(queues []Queue) (*Tree, error) {
	t := &Tree{queues: map[string]*Queue{}, kids: map[string][]string{}}
	for i := range queues {
		q := queues[i]
		path := fmt.Sprintf("queues[%d]", i)
		if !validName(q.Name) {
			return nil, fmt.Errorf("%s.name: must be a lowercase DNS label (a-z, 0-9, '-', '.', at most 63), got %q", path, q.Name)
		}
		if _, dup := t.queues[q.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q is defined twice", path, q.Name)
		}
		if q.Weight < 0 {
			return nil, fmt.Errorf("%s.weight: must be >= 0 (0 means 1), got %d", path, q.Weight)
		}
		if q.Weight == 0 {
			q.Weight = 1
		}
		if err := q.Guaranteed.validate(path + ".guaranteed"); err != nil {
			return nil, err
		}
		if err := q.Limit.validate(path + ".limit"); err != nil {
			return nil, err
		}
		if !q.Guaranteed.Fits(q.Limit) {
			return nil, fmt.Errorf("%s.guaranteed: must be within %s.limit", path, path)
		}
		if err := checkIdleReclaimAfter(path+".idleReclaimAfter", q.IdleReclaimAfter); err != nil {
			return nil, err
		}
		t.queues[q.Name] = &q
	}
	if _, ok := t.queues[DefaultQueue]; !ok {
		t.queues[DefaultQueue] = &Queue{Name: DefaultQueue, Weight: 1}
	}
	for _, q := range t.queues {
		if q.Parent == "" {
			continue
		}
		if _, ok := t.queues[q.Parent]; !ok {
			return nil, fmt.Errorf("queue %s: parent %q is not defined", q.Name, q.Parent)
		}
		t.kids[q.Parent] = append(t.kids[q.Parent], q.Name)
	}
	for name := range t.queues {
		depth := 0
		for cur := name; t.queues[cur].Parent != ""; cur = t.queues[cur].Parent {
			if depth++; depth > MaxDepth {
				return nil, fmt.Errorf("queue %s: the parent chain is a cycle or deeper than %d", name, MaxDepth)
			}
		}
	}
	for _, kids := range t.kids {
		sort.Strings(kids)
	}
	return t, nil
}

// Queue returns a queue by name.
func (t *Tree) Queue(name string) (Queue, bool) {
	q, ok := t.queues[name]
	if !ok {
		return Queue{}, false
	}
	return *q, true
}

// IdleReclaimAfter is how long a workload of queue name must hold its GPUs
// idle before it may be stopped for others (0: never); an unknown name is
// the default queue's. It suits preemption.Rules.IdleAfter.
func (t *Tree) IdleReclaimAfter(name string) time.Duration {
	q, ok := t.queues[QueueOr(name)]
	if !ok {
		q = t.queues[DefaultQueue]
	}
	if q == nil {
		return 0
	}
	return q.IdleReclaimAfter
}

// IdleReclaims reports whether any queue sets IdleReclaimAfter: front doors
// read idle marks only then.
func (t *Tree) IdleReclaims() bool {
	for _, q := range t.queues {
		if q.IdleReclaimAfter > 0 {
			return true
		}
	}
	return false
}

// Names lists every queue, sorted.
func (t *Tree) Names() []string {
	out := make([]string, 0, len(t.queues))
	for n := range t.queues {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Ancestry returns name and its ancestors, nearest first.
func (t *Tree) Ancestry(name string) []string {
	var out []string
	for cur := name; cur != ""; cur = t.queues[cur].Parent {
		out = append(out, cur)
	}
	return out
}
