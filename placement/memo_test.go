package placement

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestFragKeyIsTheMultiset: permutations of a state give one key; states
// that differ in any value, the GPU count, the CPU or the model do not.
func TestFragKeyIsTheMultiset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	type state struct {
		id     int
		cpu    int64
		sorted string
	}
	seen := map[fragKey]state{}
	for trial := 0; trial < 20000; trial++ {
		free := make([]int64, rng.IntN(memoGPUs+1))
		for i := range free {
			free[i] = []int64{0, 1000, 1023, int64(rng.IntN(1024))}[rng.IntN(4)]
		}
		id, cpu := rng.IntN(3), int64(rng.IntN(4))*1000
		k, ok := makeKey(id, cpu, free)
		if !ok {
			t.Fatalf("no key for %v", free)
		}
		perm := slices.Clone(free)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		if k2, _ := makeKey(id, cpu, perm); k2 != k {
			t.Fatalf("%v and %v give different keys", free, perm)
		}
		slices.Sort(free)
		s := state{id, cpu, fmt.Sprint(free)}
		if old, dup := seen[k]; dup && old != s {
			t.Fatalf("states %+v and %+v share a key", old, s)
		}
		seen[k] = s
	}
	for _, bad := range [][]int64{{-1}, {1024}, make([]int64, memoGPUs+1)} {
		if _, ok := makeKey(0, 0, bad); ok {
			t.Fatalf("key for %v, want none", bad)
		}
	}
	if _, ok := makeKey(-1, 0, nil); ok {
		t.Fatal("key for model id -1, want none")
	}
}

// TestFragMeterConcurrent: goroutines sharing one meter (and its memo) get
// what the meter computes without the memo. Run with -race.
func TestFragMeterConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	c := mixedCluster(rng, 300)
	pods := randomPods(rng, 60)
	f := newFragMeter(TypicalShapes(pods, 1))
	plain := func(n *Node, cpu int64, free []int64) float64 {
		model, homo := "", true
		for i := range n.GPUs {
			if i == 0 {
				model = n.GPUs[0].Model
			} else if n.GPUs[i].Model != model {
				homo = false
			}
		}
		return f.compute(n, model, homo && len(free) <= memoGPUs, cpu, free)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for round := 0; round < 3; round++ {
				for ni := range c.Nodes {
					n := &c.Nodes[(ni*(w+1))%len(c.Nodes)]
					free := make([]int64, len(n.GPUs))
					for i := range n.GPUs {
						free[i] = n.GPUs[i].FreeMilli
					}
					if got, want := f.current(n), plain(n, hostCPU(n, 0), free); got != want {
						errs <- fmt.Sprintf("node %s: current %v, want %v", n.Name, got, want)
						return
					}
					p := &pods[(ni+w)%len(pods)]
					if !feasible(n, p) || p.GPUCount() == 0 {
						continue
					}
					gpus := defaultGPUs(n, p, usableGPUs(nil, n, p))
					for _, i := range gpus {
						free[i] -= p.MilliPerGPU()
					}
					if got, want := f.after(n, p, gpus), plain(n, hostCPU(n, p.CPUMilli), free); got != want {
						errs <- fmt.Sprintf("node %s: after %v, want %v", n.Name, got, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if f.memo.len() == 0 {
		t.Fatal("memo stayed empty")
	}
}

// memoKeys are the memo keys of every node of a half-full openb-like
// cluster, as they are and after each typical pod.
func memoKeys() []fragKey {
	c, d := openbLike(5000)
	var keys []fragKey
	for ni := range c.Nodes {
		n := &c.Nodes[ni]
		free := make([]int64, len(n.GPUs))
		for i := range n.GPUs {
			free[i] = n.GPUs[i].FreeMilli
		}
		if k, ok := makeKey(int(n.GPUs[0].Model[0]), hostCPU(n, 0), free); ok {
			keys = append(keys, k)
		}
		for _, t := range d {
			if t.Shape.GPUCount != 1 {
				continue
			}
			for i := range free {
				if free[i] >= t.Shape.GPUMilli {
					free[i] -= t.Shape.GPUMilli
					if k, ok := makeKey(int(n.GPUs[0].Model[0]), hostCPU(n, t.Shape.CPUMilli), free); ok {
						keys = append(keys, k)
					}
					free[i] += t.Shape.GPUMilli
				}
			}
		}
	}
	return keys
}

// BenchmarkMemo compares concurrency-safe memo designs on the key mix of
// a 5,000-node cluster (warm: every key present): the lock-free table the
// meter uses, 64 map shards behind RWMutexes, one map behind one RWMutex,
// and a sync.Map, against an unguarded map (what the meter used before it
// was made safe; one goroutine only). Each iteration looks up a batch of
// keys in every design in turn, from one goroutine (seq) and from
// GOMAXPROCS goroutines at once (par), so all designs see the same
// machine load; it reports ns per lookup (par: wall time over all
// lookups) and each design's ratio to the plain map.
func BenchmarkMemo(b *testing.B) {
	keys := memoKeys()
	type design struct {
		name string
		get  func(k *fragKey) (float64, bool)
		safe bool
	}
	var designs []design
	{
		m := map[fragKey]float64{}
		for i := range keys {
			m[keys[i]] = float64(i)
		}
		designs = append(designs, design{"plain", func(k *fragKey) (float64, bool) { v, ok := m[*k]; return v, ok }, false})
	}
	{
		m := &fragMemo{}
		for i := range keys {
			m.put(&keys[i], float64(i))
		}
		designs = append(designs, design{"table", m.get, true})
	}
	{
		m := &shardedMemo{}
		for i := range keys {
			m.put(&keys[i], float64(i))
		}
		designs = append(designs, design{"sharded", m.get, true})
	}
	{
		var mu sync.RWMutex
		m := map[fragKey]float64{}
		for i := range keys {
			m[keys[i]] = float64(i)
		}
		designs = append(designs, design{"rwmutex", func(k *fragKey) (float64, bool) {
			mu.RLock()
			v, ok := m[*k]
			mu.RUnlock()
			return v, ok
		}, true})
	}
	{
		var m sync.Map
		for i := range keys {
			m.Store(keys[i], float64(i))
		}
		designs = append(designs, design{"syncmap", func(k *fragKey) (float64, bool) {
			v, ok := m.Load(*k)
			if !ok {
				return 0, false
			}
			return v.(float64), true
		}, true})
	}
	const batch = 4096
	lookups := func(get func(*fragKey) (float64, bool), from int) bool {
		for j := 0; j < batch; j++ {
			if _, ok := get(&keys[(from+j)%len(keys)]); !ok {
				return false
			}
		}
		return true
	}
	workers := runtime.GOMAXPROCS(0)
	seq := make([]time.Duration, len(designs))
	par := make([]time.Duration, len(designs))
	i := 0
	for b.Loop() {
		from := i * batch
		for k := range designs {
			d := &designs[(k+i)%len(designs)]
			di := (k + i) % len(designs)
			start := time.Now()
			if !lookups(d.get, from) {
				b.Fatal("miss")
			}
			seq[di] += time.Since(start)
			if !d.safe {
				continue
			}
			start = time.Now()
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Go(func() { lookups(d.get, from+w*batch) })
			}
			wg.Wait()
			par[di] += time.Since(start)
		}
		i++
	}
	per := func(t time.Duration, n int) float64 { return float64(t.Nanoseconds()) / float64(n) }
	base := per(seq[0], i*batch)
	for k, d := range designs {
		b.ReportMetric(per(seq[k], i*batch), d.name+"-seq-ns")
		if d.safe {
			b.ReportMetric(per(par[k], i*batch*workers), d.name+"-par-ns")
			b.ReportMetric(per(seq[k], i*batch)/base, d.name+"/plain-seq")
		}
	}
}

// shardedMemo is the sharded-map design BenchmarkMemo compares the table
// with.
type shardedMemo struct {
	shards [64]struct {
		mu sync.RWMutex
		m  map[fragKey]float64
		_  [32]byte
	}
}

func (m *shardedMemo) get(k *fragKey) (float64, bool) {
	s := &m.shards[k.hash()>>58]
	s.mu.RLock()
	v, ok := s.m[*k]
	s.mu.RUnlock()
	return v, ok
}

func (m *shardedMemo) put(k *fragKey, v float64) {
	s := &m.shards[k.hash()>>58]
	s.mu.Lock()
	if s.m == nil {
		s.m = map[fragKey]float64{}
	}
	s.m[*k] = v
	s.mu.Unlock()
}

// TestSortFirst checks sortFirst (sorted8 for eight) for every count on
// every 0/1 input (the
// 0-1 principle: a sorting network that sorts those sorts everything) and
// that it leaves the rest alone.
func TestSortFirst(t *testing.T) {
	for n := 0; n <= memoGPUs; n++ {
		for bits := 0; bits < 1<<n; bits++ {
			var s [memoGPUs]uint64
			for i := range n {
				s[i] = uint64(bits >> i & 1)
			}
			for i := n; i < memoGPUs; i++ {
				s[i] = 7
			}
			if n == memoGPUs {
				lo, hi := sorted8(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
				for i := range s {
					s[i] = lo >> (10 * i) & memoMaxFree
				}
				s[6], s[7] = hi&memoMaxFree, hi>>10&memoMaxFree
			} else {
				sortFirst(&s, n)
			}
			if !slices.IsSorted(s[:n]) || slices.ContainsFunc(s[n:], func(v uint64) bool { return v != 7 }) {
				t.Fatalf("n %d, input %08b: %v", n, bits, s)
			}
		}
	}
}
