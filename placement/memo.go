package placement

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The fragmentation memo is shared by the goroutines that score parts of
// the node list at the same time (see parallel.go), so it is safe for
// concurrent use without locks on the lookup path: an open-addressing hash
// table of fixed-size slots written once each with atomic stores. A writer
// claims an empty slot by compare-and-swap, fills it and publishes it by
// storing the key's last word with a ready bit; a reader that sees that
// word sees the rest. When the table is half full a bigger one replaces
// it (under a mutex, copying the published slots); at memoLimit entries it
// starts over empty. Values are a pure function of the key, so a lost or
// duplicated insert (two goroutines computing one state at once, or
// inserting while the table is replaced) costs a recomputation and never
// changes a result.
//
// Measured against the alternatives (BenchmarkMemo in memo_test.go: warm
// memo, the key mix of a 5,000-node cluster, designs interleaved; three
// runs on the shared 2-core machine): the table answers a lookup in
// 0.34-0.51 of the time of the unguarded Go map the meter used before;
// 64 map shards behind read-write mutexes take 0.8-1.3 of it, one map
// behind one read-write mutex 0.8-1.0 (but every reader writes the one
// lock word, which goes back and forth between cores), and a sync.Map,
// which boxes every key into an interface, 1.5-1.7. Per-worker memos
// would need the worker passed down to every policy's scoring function.

// fragKey is a homogeneous node state: its model (an id from the meter's
// model table), GPU count, free CPU and its GPUs' free compute in
// ascending order, ten bits each (see makeKey).
type fragKey struct {
	lo  uint64 // values 0-5
	hi  uint64 // values 6-7, then the GPU count (4 bits) and model id (16 bits)
	cpu int64
}

// hash mixes the key's words.
func (k *fragKey) hash() uint64 {
	h := k.lo*0x9e3779b97f4a7c15 + k.hi*0xc2b2ae3d27d4eb4f + uint64(k.cpu)*0x165667b19e3779f9
	h ^= h >> 32
	return h * 0xd6e8feb86659fd93
}

const (
	slotReady = 1 << 63 // in memoSlot.hi: the slot is published
	slotBusy  = 1 << 62 // in memoSlot.hi: claimed, being written
	// memoMinBits is the initial table's size (log2 slots).
	memoMinBits = 10
	// memoMaxProbe bounds a probe sequence; a put that finds no slot in it
	// is dropped.
	memoMaxProbe = 64
)

type memoSlot struct {
	hi, lo, cpu, val atomic.Uint64
}

type memoTable struct {
	slots []memoSlot
	shift uint // 64 - log2(len(slots))
	used  atomic.Int64
}

func newMemoTable(bits uint) *memoTable {
	return &memoTable{slots: make([]memoSlot, 1<<bits), shift: 64 - bits}
}

// fragMemo maps fragKeys to fragmentation values.
type fragMemo struct {
	mu  sync.Mutex // held to replace the table
	tab atomic.Pointer[memoTable]
}

func (m *fragMemo) get(k *fragKey) (float64, bool) {
	t := m.tab.Load()
	if t == nil {
		return 0, false
	}
	want := k.hi | slotReady
	mask := uint64(len(t.slots) - 1)
	i := k.hash() >> t.shift
	for probe := 0; probe < memoMaxProbe; probe++ {
		s := &t.slots[i]
		h := s.hi.Load()
		if h == 0 {
			return 0, false
		}
		if h == want && s.lo.Load() == k.lo && s.cpu.Load() == uint64(k.cpu) {
			return math.Float64frombits(s.val.Load()), true
		}
		i = (i + 1) & mask
	}
	return 0, false
}

func (m *fragMemo) put(k *fragKey, v float64) {
	t := m.tab.Load()
	if t == nil || 2*t.used.Load() >= int64(len(t.slots)) {
		t = m.grow(t)
	}
	want := k.hi | slotReady
	mask := uint64(len(t.slots) - 1)
	i := k.hash() >> t.shift
	for probe := 0; probe < memoMaxProbe; probe++ {
		s := &t.slots[i]
		h := s.hi.Load()
		if h == 0 && s.hi.CompareAndSwap(0, slotBusy) {
			s.lo.Store(k.lo)
			s.cpu.Store(uint64(k.cpu))
			s.val.Store(math.Float64bits(v))
			s.hi.Store(want)
			t.used.Add(1)
			return
		}
		if h == want && s.lo.Load() == k.lo && s.cpu.Load() == uint64(k.cpu) {
			return // another goroutine got there first
		}
		i = (i + 1) & mask
	}
}

// grow replaces full (the table a writer found half full, or nil) by one
// twice the size holding its entries, or by an empty one past memoLimit
// entries, and returns the table now in place.
func (m *fragMemo) grow(full *memoTable) *memoTable {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.tab.Load(); t != full {
		return t // replaced meanwhile
	}
	if full == nil || full.used.Load() >= memoLimit {
		t := newMemoTable(memoMinBits)
		m.tab.Store(t)
		return t
	}
	t := newMemoTable(64 - full.shift + 1)
	for i := range full.slots {
		s := &full.slots[i]
		if h := s.hi.Load(); h&slotReady != 0 {
			k := fragKey{lo: s.lo.Load(), hi: h &^ slotReady, cpu: int64(s.cpu.Load())}
			t.insert(&k, s.val.Load())
		}
	}
	m.tab.Store(t)
	return t
}

// insert puts a key into a table no other goroutine sees yet.
func (t *memoTable) insert(k *fragKey, val uint64) {
	mask := uint64(len(t.slots) - 1)
	for i := k.hash() >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.hi.Load() == 0 {
			s.lo.Store(k.lo)
			s.cpu.Store(uint64(k.cpu))
			s.val.Store(val)
			s.hi.Store(k.hi | slotReady)
			t.used.Add(1)
			return
		}
	}
}

// len is the number of memoised states.
func (m *fragMemo) len() int {
	if t := m.tab.Load(); t != nil {
		return int(t.used.Load())
	}
	return 0
}

// modelInfo is what the meter knows of one GPU model: its id in memo keys
// and which typical shapes may run on it.
type modelInfo struct {
	name   string
	access []bool
}

// maxModels bounds the model ids a key can hold; nodes of further models
// are computed without the memo.
const maxModels = 1 << 16

// modelTable maps model labels to ids, safe for concurrent use: readers
// scan an immutable slice (there are a handful of models); a new model
// copies it under the mutex.
type modelTable struct {
	mu  sync.Mutex
	cur atomic.Pointer[[]modelInfo]
}

// lookup returns model's id and access list, adding it (with access built
// by build) on first sight; id is -1 when the table is full.
func (t *modelTable) lookup(model string, build func(string) []bool) (int, []bool) {
	if p := t.cur.Load(); p != nil {
		// Models of nodes built alike share their bytes with the entry:
		// look for the same bytes first, then for equal ones.
		for i := range *p {
			if e := &(*p)[i]; len(e.name) == len(model) && unsafe.StringData(e.name) == unsafe.StringData(model) {
				return i, e.access
			}
		}
		for i := range *p {
			if (*p)[i].name == model {
				return i, (*p)[i].access
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var old []modelInfo
	if p := t.cur.Load(); p != nil {
		old = *p
	}
	for i := range old {
		if old[i].name == model {
			return i, old[i].access
		}
	}
	acc := build(model)
	if len(old) >= maxModels {
		return -1, acc
	}
	next := append(old[:len(old):len(old)], modelInfo{name: model, access: acc})
	t.cur.Store(&next)
	return len(next) - 1, acc
}
