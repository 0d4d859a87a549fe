package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/request"
)

// classCluster is a random cluster of nodes drawn from a few templates:
// plain nodes of three models with and without GPU memory tracked, nodes
// with NVLink and NUMA topology, with GPUs of mixed models or memory
// sizes (two arrangements of each), with 16 GPUs, with CPU and memory not
// tracked, without GPUs, and with MIG GPUs; some templates allow a few
// pods (Node.Pods), so nodes fill their pod slots. Nodes come in groups that
// took the same random pods, each copy of a plain node with its GPUs in
// another order, so that classes hold nodes whose GPUs are arranged
// differently; random pods on random nodes then fill the cluster further.
func classCluster(t *testing.T, rng *rand.Rand) *Cluster {
	t.Helper()
	var templates []Node
	for _, model := range []string{"A", "B", "C"} {
		for _, gpus := range []int{1, 2, 4, 8} {
			templates = append(templates, NewNode(model, 64000, []int64{48 << 10, 256 << 10}[rng.IntN(2)], gpus, model, []int64{0, 16384}[rng.IntN(2)]))
		}
	}
	topo := NewNode("topo", 96000, 512<<10, 8, "A", 16384)
	topo.NVLinks = make([][]int, 8)
	for a := range topo.NVLinks {
		topo.NVLinks[a] = make([]int, 8)
		topo.GPUs[a].NUMANode = a / 4
	}
	topo.NVLinks[0][1], topo.NVLinks[1][0], topo.NVLinks[2][3], topo.NVLinks[3][2] = 4, 4, 2, 2
	numa := NewNode("numa", 32000, 128<<10, 4, "B", 0)
	for a := range numa.GPUs {
		numa.GPUs[a].NUMANode = a % 2
	}
	mixed := NewNode("mixed", 64000, 1<<18, 4, "A", 16384)
	mixed.GPUs[2].MemoryMiB, mixed.GPUs[2].FreeMemoryMiB = 8192, 8192
	mixed2 := NewNode("mixed2", 64000, 1<<18, 4, "A", 16384)
	mixed2.GPUs[0].MemoryMiB, mixed2.GPUs[0].FreeMemoryMiB = 8192, 8192
	models := NewNode("models", 32000, 48<<10, 4, "A", 16384)
	models.GPUs[0].Model, models.GPUs[1].Model = "B", "B"
	models2 := NewNode("models2", 32000, 48<<10, 4, "A", 16384)
	models2.GPUs[1].Model, models2.GPUs[3].Model = "B", "B"
	templates = append(templates, topo, numa, mixed, mixed2, models, models2,
		NewNode("big", 128000, 1<<19, 16, "B", 0), NewNode("cpu", 32000, 64<<10, 0, "", 0),
		NewNode("untracked", 0, 0, 2, "A", 0), NewNode("small", 4000, 0, 2, "A", 0), NewNode("smallmem", 0, 16<<10, 2, "A", 0))
	for i := range templates {
		if rng.IntN(3) == 0 {
			templates[i].Pods = int64(2 + rng.IntN(5))
			templates[i].FreePods = templates[i].Pods
		}
	}
	rng.Shuffle(len(templates), func(i, j int) { templates[i], templates[j] = templates[j], templates[i] })
	templates = templates[:3+rng.IntN(len(templates)-2)] // a few templates per cluster
	c := &Cluster{}
	for len(c.Nodes) < 40+rng.IntN(160) {
		g := &Cluster{Nodes: []Node{templates[rng.IntN(len(templates))]}}
		g = g.Clone()
		fill(rng, g, 1+rng.IntN(4))
		for range 1 + rng.IntN(8) {
			n := g.Clone().Nodes[0]
			if isPlain(&n) {
				rng.Shuffle(len(n.GPUs), func(i, j int) { n.GPUs[i], n.GPUs[j] = n.GPUs[j], n.GPUs[i] })
			}
			n.Name = fmt.Sprintf("n%d", len(c.Nodes))
			c.Nodes = append(c.Nodes, n)
		}
	}
	if rng.IntN(2) == 0 {
		mig, err := FromInventory([]inventory.Node{migInv("mig0", "A100-40GB", 2, true), migInv("mig1", "A100-40GB", 2, true), migInv("mig2", "H100-SXM", 1, true), plainInv("plain", "H100-SXM", 2)})
		if err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, mig.Nodes...)
	}
	c = c.Clone()
	fill(rng, c, len(c.Nodes)/4)
	for i := range c.Nodes {
		if rng.IntN(12) == 0 {
			c.Nodes[i].Closed = "node is closed for the test" // fits nothing, keeps its work
		}
	}
	return c
}

// fill places k random pods on random nodes of c, on random GPUs that fit
// (any arrangement).
func fill(rng *rand.Rand, c *Cluster, k int) {
	for _, p := range classPods(rng, k) {
		ni := rng.IntN(len(c.Nodes))
		if nd := &c.Nodes[ni]; feasible(nd, &p) && !p.MIG() {
			usable := usableGPUs(nil, nd, &p)
			rng.Shuffle(len(usable), func(i, j int) { usable[i], usable[j] = usable[j], usable[i] })
			_ = c.Apply(&p, Decision{Node: ni, GPUs: usable[:p.GPUCount()]})
		}
	}
}

// classPods are random pods of every kind, with CPU and memory from a
// few values so that nodes meet in equal states: CPU-only, shares (some
// memory-only, some with more GPU memory than their compute share),
// whole and multi-GPU (some limited to models or exclusive), multi-GPU
// shares, and MIG requests; most take a pod slot.
func classPods(rng *rand.Rand, k int) []Pod {
	pods := make([]Pod, k)
	for i := range pods {
		p := &pods[i]
		p.Name = fmt.Sprint("p", i)
		p.CPUMilli = 2000 * int64(rng.IntN(4))
		p.MemoryMiB = 8192 * int64(rng.IntN(3))
		switch rng.IntN(12) {
		case 0: // CPU only
		case 1, 2, 3:
			m := []int64{100, 250, 300, 500, 750}[rng.IntN(5)]
			p.GPU = request.GPU{Count: 1, ComputeMilli: m, ComputeLimitMilli: m}
		case 4: // memory-only share
			p.GPU = request.GPU{Count: 1, MemoryMiB: 2048 * int64(1+rng.IntN(4))}
		case 5: // share with more GPU memory than its compute share
			p.GPU = request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 8192}
		case 6: // multi-GPU share: scored node by node
			p.GPU = request.GPU{Count: 2, ComputeMilli: 300, ComputeLimitMilli: 300}
		case 7:
			p.GPU = request.GPU{Count: 1 + rng.IntN(2), Exclusive: true}
		case 8:
			*p = migPod(p.Name, []string{"1g.5gb", "2g.10gb", "3g.20gb", "1g.10gb"}[rng.IntN(4)], 1)
		default:
			*p = wholePod(p.Name, p.CPUMilli, []int{1, 1, 2, 4, 8}[rng.IntN(5)], [][]string{nil, nil, {"A"}, {"A", "B"}}[rng.IntN(4)]...)
		}
		p.Slot = rng.IntN(4) != 0
	}
	return pods
}

// TestClassesMatchNodeByNode replays random sequences of placements,
// releases, hand changes and placements on views that leave nodes out
// (as package cycle makes) with two instances of every policy, one
// scoring by class and one node by node (sequentially for odd seeds, in
// parallel for even ones), on two copies of a random cluster: every
// decision (node, GPUs, error) must be the same.
func TestClassesMatchNodeByNode(t *testing.T) {
	for _, name := range Names() {
		for _, learn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/learn=%v", name, learn), func(t *testing.T) {
				decisions, byClass, placed, remembered := 0, 0, 0, 0
				for seed := uint64(1); seed <= 8; seed++ {
					// Seeds 7 and 8 draw their pods from three shapes, as a
					// scheduler sees few shapes over and over: the class
					// chooser then scores most classes from its memo.
					d, b, p, r := replayBothWays(t, name, learn, seed)
					decisions += d
					byClass += b
					placed += p
					remembered += r
				}
				if name == "tessera" && remembered == 0 {
					t.Fatal("no class score was taken from the memo")
				}
				if name != "random" && byClass < decisions/3 {
					t.Fatalf("only %d of %d decisions were made by class", byClass, decisions)
				}
				if name == "random" && byClass > 0 {
					t.Fatalf("random made %d decisions by class", byClass)
				}
				t.Logf("%d of %d decisions by class, %d placed, %d class scores remembered", byClass, decisions, placed, remembered)
			})
		}
	}
}

// replayBothWays is one random sequence of TestClassesMatchNodeByNode; it
// returns the decisions made on the whole cluster, how many the class
// chooser made by class, how many placed the pod and how many class
// scores it took from its memo (classmemo.go).
func replayBothWays(t *testing.T, name string, learn bool, seed uint64) (decisions, byClass, placed, remembered int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 20))
	c := classCluster(t, rng)
	pods := classPods(rng, 300)
	if seed > 6 {
		for i := 3; i < len(pods); i++ {
			pods[i], pods[i].Name = pods[i%3], fmt.Sprint("p", i)
		}
	}
	o := Options{Seed: seed, Workers: 1}
	if !learn {
		o.Typical = TypicalShapes(pods, 0.95)
	}
	cls, err := New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	if seed%2 == 0 { // node by node in parallel, on four goroutines
		o.Workers = 4
	}
	per, _ := New(name, o)
	chooserOf(per).tuning = parallelTuning{minNodes: 2, chunk: 8, fixed: true}
	chooserOf(cls).class.minNodes = 1
	chooserOf(cls).class.check = checkClasses(t, chooserOf(cls))
	chooserOf(per).class.off = true
	cc, cp := c, c.Clone()
	cp.record(0) // both copies have a change log
	var live []booked
	for step, i := 0, 0; i < len(pods); step++ {
		label := fmt.Sprintf("seed %d step %d", seed, step)
		switch r := rng.IntN(20); {
		case r < 3 && len(live) > 0: // a release
			k := rng.IntN(len(live))
			b := live[k]
			live = slices.Delete(live, k, k+1)
			if err := cc.Release(&b.p, b.d); err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			if err := cp.Release(&b.p, b.d); err != nil {
				t.Fatalf("%s: %v", label, err)
			}
		case r == 3: // a hand change, told through Changed
			ni := rng.IntN(len(cc.Nodes))
			grow := rng.IntN(4) == 0
			if rng.IntN(3) == 0 { // closed, or open again
				for _, x := range []*Cluster{cc, cp} {
					n := &x.Nodes[ni]
					n.Closed = map[bool]string{true: "node is closed for the test"}[n.Closed == ""]
					x.Changed(ni)
				}
				continue
			}
			for _, x := range []*Cluster{cc, cp} {
				n := &x.Nodes[ni]
				n.FreeCPUMilli /= 2
				if grow && n.CPUMilli > 0 { // capacity too: what the baselines normalise by (untracked CPU stays so: its pods booked none)
					n.CPUMilli += 200000
					n.FreeCPUMilli += 200000
				}
				x.Changed(ni)
			}
		case r == 4: // a placement on a view leaving nodes out
			p := pods[i]
			i++
			keep := viewOf(rng, len(cc.Nodes))
			dc, ec := cls.Place(view(cc, keep), &p)
			dp, ep := per.Place(view(cp, keep), &p)
			compareDecisions(t, label+" (view)", dc, ec, dp, ep)
		default:
			p := pods[i]
			i++
			if ob, ok := cls.(Observer); ok {
				ob.Observe(&p)
				per.(Observer).Observe(&p)
			}
			before := chooserOf(cls).classDecisions
			dc, ec := cls.Place(cc, &p)
			dp, ep := per.Place(cp, &p)
			compareDecisions(t, label, dc, ec, dp, ep)
			decisions++
			byClass += chooserOf(cls).classDecisions - before
			if ec != nil {
				continue
			}
			placed++
			if err := cc.Apply(&p, dc); err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			if err := cp.Apply(&p, dp); err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			live = append(live, booked{p, Decision{Node: dc.Node, GPUs: slices.Clone(dc.GPUs), MIG: slices.Clone(dc.MIG)}})
		}
	}
	if !reflect.DeepEqual(cc.Nodes, cp.Nodes) {
		t.Fatalf("seed %d: the two clusters differ at the end", seed)
	}
	return decisions, byClass, placed, chooserOf(cls).class.remembered
}

// checkClasses returns a check of the class index before a decision by
// class: it groups every node once, under the key of its state now, in
// heaps by the chooser's tie order; every node of a class is as feasible
// as the class's top and scores bit for bit the same; the hole counts and
// the capacities read through the index are those of a pass over the
// nodes.
func checkClasses(t *testing.T, ch *chooser) func(c *Cluster, ix *classIndex, pf *podFit, score nodeScore) {
	return func(c *Cluster, ix *classIndex, pf *podFit, score nodeScore) {
		t.Helper()
		if ix.ordered != ch.rankGen {
			t.Fatalf("heaps follow tie order %d, the chooser's is %d", ix.ordered, ch.rankGen)
		}
		seen := 0
		var u0, u1 []int
		for at, k := range ix.live {
			cl := &ix.classes[k]
			if cl.at != int32(at) || ix.byKey[cl.key] != k || len(cl.members) == 0 {
				t.Fatalf("class %d: at %d (live at %d), byKey %d, %d members", k, cl.at, at, ix.byKey[cl.key], len(cl.members))
			}
			top := int(cl.members[0])
			var ok0 bool
			u0, ok0 = pf.fit(u0[:0], &c.Nodes[top])
			var s0 float64
			if ok0 {
				s0, _ = score(c, top, pf.p, u0)
			}
			if top != int(cl.top) || int(cl.topRank) != ch.rank[top] {
				t.Fatalf("class %d: top %d (rank %d) recorded, heap's %d", k, cl.top, cl.topRank, top)
			}
			if !cl.unique { // the representative is as feasible and scores the same
				var ok bool
				u1, ok = pf.fit(u1[:0], &ix.reps.Nodes[k])
				if ok != ok0 || len(u1) != len(u0) {
					t.Fatalf("pod %s: class %d: representative feasible %v, top %v", pf.p.Name, k, ok, ok0)
				}
				if ok {
					if s, _ := score(&ix.reps, int(k), pf.p, u1); math.Float64bits(s) != math.Float64bits(s0) {
						t.Fatalf("pod %s: class %d: representative scores %v, top %v", pf.p.Name, k, s, s0)
					}
				}
			}
			for i, ni := range cl.members {
				seen++
				if ix.classOf[ni] != k || ix.pos[ni] != int32(i) {
					t.Fatalf("node %d: class %d pos %d, found in class %d at %d", ni, ix.classOf[ni], ix.pos[ni], k, i)
				}
				if key := string(appendClassKey(nil, &c.Nodes[ni], int(ni), ix.keyShapes)); key != cl.key {
					t.Fatalf("node %d: stale class", ni)
				}
				if i > 0 && ch.rank[cl.members[(i-1)/2]] > ch.rank[ni] {
					t.Fatalf("class %d: not a heap by rank at %d", k, i)
				}
				var ok bool
				u1, ok = pf.fit(u1[:0], &c.Nodes[ni])
				if ok != ok0 || len(u1) != len(u0) {
					t.Fatalf("pod %s: node %d feasible %v (%d GPUs), its class's top %d %v (%d GPUs)", pf.p.Name, ni, ok, len(u1), top, ok0, len(u0))
				}
				if ok {
					if s, _ := score(c, int(ni), pf.p, u1); math.Float64bits(s) != math.Float64bits(s0) {
						t.Fatalf("pod %s: node %d scores %v, its class's top %d %v", pf.p.Name, ni, s, top, s0)
					}
				}
			}
		}
		if seen != len(c.Nodes) {
			t.Fatalf("%d nodes in classes, %d in the cluster", seen, len(c.Nodes))
		}
		var h0, h1 [request.Whole]float64
		f1 := ix.holeCounts(c, &h1)
		var f0 float64
		for i := range c.Nodes {
			for _, g := range c.Nodes[i].GPUs {
				f0 += float64(g.FreeMilli)
				if g.FreeMilli > 0 && g.FreeMilli < request.Whole {
					h0[g.FreeMilli]++
				}
			}
		}
		if f0 != f1 || h0 != h1 {
			t.Fatalf("hole counts by class differ from the nodes'")
		}
		if got := ix.clusterSpecs(c); got != clusterSpecs(c) {
			t.Fatalf("specs %+v, the nodes' %+v", got, clusterSpecs(c))
		}
	}
}

func compareDecisions(t *testing.T, label string, dc Decision, ec error, dp Decision, ep error) {
	t.Helper()
	if !reflect.DeepEqual(dc, dp) || fmt.Sprint(ec) != fmt.Sprint(ep) {
		t.Fatalf("%s: by class %+v, %v; node by node %+v, %v", label, dc, ec, dp, ep)
	}
}

// viewOf picks the nodes a view keeps (most of them).
func viewOf(rng *rand.Rand, n int) []int {
	var keep []int
	for i := 0; i < n; i++ {
		if rng.IntN(8) != 0 {
			keep = append(keep, i)
		}
	}
	return keep
}

// view is c restricted to keep, built as package cycle builds its views
// (node values copied, GPUs shared).
func view(c *Cluster, keep []int) *Cluster {
	v := &Cluster{Nodes: make([]Node, len(keep))}
	for vi, i := range keep {
		v.Nodes[vi] = c.Nodes[i]
	}
	return v
}

// TestClassIndexRebuildsWhenBehind: more changes between two decisions
// than the change log keeps, and a cluster whose nodes are replaced,
// make the index rebuild; decisions stay the same as node by node.
func TestClassIndexRebuildsWhenBehind(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	c := classCluster(t, rng)
	o := Options{Seed: 3, Typical: TypicalShapes(classPods(rng, 50), 1)}
	cls, _ := New("tessera", o)
	per, _ := New("tessera", o)
	chooserOf(cls).class.minNodes = 1
	chooserOf(per).class.off = true
	cp := c.Clone()
	pod := sharePod("s", 1000, 300)
	cpu := cpuPod("c", 10)
	for round := 0; round < 6; round++ {
		for _, x := range []*Cluster{c, cp} {
			if round == 2 {
				ni := rng.IntN(len(x.Nodes))
				for k := 0; k < changeLogSize+10; k++ { // a burst past the log
					_ = x.Apply(&cpu, Decision{Node: ni})
					_ = x.Release(&cpu, Decision{Node: ni})
				}
			}
		}
		if round == 4 { // the nodes replaced by a copy
			c.Nodes = c.Clone().Nodes
		}
		old := chooserOf(cls).cache.ixs[0]
		dc, ec := cls.Place(c, &pod)
		dp, ep := per.Place(cp, &pod)
		compareDecisions(t, fmt.Sprint("round ", round), dc, ec, dp, ep)
		if ix := chooserOf(cls).cache.ixs[0]; (round == 2 || round == 4) && (ix == old || ix == nil) {
			t.Fatalf("round %d: the index was not rebuilt", round)
		}
		if ec == nil {
			_ = c.Apply(&pod, dc)
			_ = cp.Apply(&pod, dp)
		}
	}
}

// TestClassKey: nodes that differ in anything feasibility or a class-based
// policy reads have different keys; a plain node's GPUs in another order,
// another name or other device indexes keep the key.
func TestClassKey(t *testing.T) {
	base := func() Node {
		n := NewNode("n", 32000, 64<<10, 4, "A", 16384)
		n.GPUs[1].FreeMilli, n.GPUs[1].FreeMemoryMiB = 500, 8192
		n.GPUs[2].FreeMilli, n.GPUs[2].FreeMemoryMiB = 250, 12288
		n.Shapes = map[GPUShape]int{{Count: 1}: 2}
		return n
	}
	key := func(n Node, shapes bool) string { return string(appendClassKey(nil, &n, 0, shapes)) }
	b := base()
	same := map[string]func(n *Node){
		"name":        func(n *Node) { n.Name = "other" },
		"index":       func(n *Node) { n.GPUs[0].Index = 7 },
		"order":       func(n *Node) { n.GPUs[0], n.GPUs[2], n.GPUs[1] = n.GPUs[2], n.GPUs[1], n.GPUs[0] },
		"NUMA < 0":    func(n *Node) { n.GPUs[3].NUMANode = -2 },
		"shape count": func(n *Node) { n.Shapes[GPUShape{Count: 1}] = 5 },
	}
	for what, change := range same {
		n := base()
		change(&n)
		if key(n, true) != key(b, true) {
			t.Errorf("%s changed the key", what)
		}
	}
	ordered := func(n *Node) { n.GPUs[3].NUMANode = 0 }
	differ := map[string]func(n *Node){
		"CPU":         func(n *Node) { n.CPUMilli = 0 },
		"memory":      func(n *Node) { n.MemoryMiB = 0 },
		"free CPU":    func(n *Node) { n.FreeCPUMilli-- },
		"free memory": func(n *Node) { n.FreeMemoryMiB-- },
		"GPU count":   func(n *Node) { n.GPUs = n.GPUs[:3] },
		"model":       func(n *Node) { n.GPUs[0].Model = "B" },
		"all models":  func(n *Node) { n.GPUs[0].Model, n.GPUs[1].Model, n.GPUs[2].Model, n.GPUs[3].Model = "B", "B", "B", "B" },
		"GPU memory":  func(n *Node) { n.GPUs[0].MemoryMiB = 8192 },
		"all GPU memory": func(n *Node) {
			n.GPUs[0].MemoryMiB, n.GPUs[1].MemoryMiB, n.GPUs[2].MemoryMiB, n.GPUs[3].MemoryMiB = 1, 1, 1, 1
		},
		"free compute":    func(n *Node) { n.GPUs[0].FreeMilli-- },
		"free GPU memory": func(n *Node) { n.GPUs[0].FreeMemoryMiB-- },
		"NUMA":            func(n *Node) { n.GPUs[0].NUMANode = 1 },
		"NVLink":          func(n *Node) { n.NVLinks = [][]int{{0, 1, 0, 0}, {1, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}} },
		"MIG":             func(n *Node) { n.GPUs[0].MIG = &MIGGPU{} },
		"shapes":          func(n *Node) { n.Shapes[GPUShape{Count: 2, Milli: 1000}] = 1 },
		"no shapes":       func(n *Node) { n.Shapes = nil },
	}
	for what, change := range differ {
		for _, topo := range []bool{false, true} {
			n, m := base(), base()
			if topo { // the ordered key
				ordered(&n)
				ordered(&m)
			}
			change(&n)
			if key(n, true) == key(m, true) {
				t.Errorf("%s (topology %v) kept the key", what, topo)
			}
		}
	}
	ordered(&b)
	n := base()
	ordered(&n)
	n.GPUs[0], n.GPUs[1] = n.GPUs[1], n.GPUs[0]
	if key(n, false) == key(b, false) {
		t.Error("GPUs in another order kept an ordered key")
	}
	if n := base(); key(n, false) == key(n, true) || key(Node{}, false) == "" {
		t.Error("shapes left out of a key that holds them, or an empty key")
	}
	mig := base()
	mig.GPUs[0].MIG = &MIGGPU{}
	if string(appendClassKey(nil, &mig, 1, false)) == string(appendClassKey(nil, &mig, 2, false)) {
		t.Error("two nodes with MIG GPUs share a class")
	}
}

// TestClassChooserMatchesWithMadeUpScores drives a class chooser and a
// node-by-node chooser with made-up scores that depend on the node's
// state only: few values (many ties), -Inf, -0 and NaN (the class
// chooser then decides node by node); the decisions must be the same.
func TestClassChooserMatchesWithMadeUpScores(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(200)
		c := &Cluster{Nodes: make([]Node, n)}
		for i := range c.Nodes {
			c.Nodes[i] = NewNode(fmt.Sprint("n", i), 1000, 0, 1, "A", 0)
			c.Nodes[i].FreeCPUMilli = int64(100 * rng.IntN(8)) // 0: infeasible for the pod below
		}
		c.record(0)
		values := make([]float64, 8)
		for i := range values {
			switch k := rng.IntN(30); {
			case k == 0:
				values[i] = math.NaN()
			case k == 1:
				values[i] = math.Inf(-1)
			case k == 2:
				values[i] = math.Copysign(0, -1)
			default:
				values[i] = float64(rng.IntN(3))
			}
		}
		score := func(c *Cluster, ni int, _ *Pod, usable []int) (float64, []int) {
			return values[c.Nodes[ni].FreeCPUMilli/100], []int{usable[0]}
		}
		pod := sharePod("p", 50, 100)
		cls, per := withClasses(newChooser(uint64(trial)), false), newChooser(uint64(trial))
		cls.class.minNodes = 1
		for round := 0; round < 8; round++ {
			want, ew := per.choose(c, &pod, score)
			got, eg := cls.choose(c, &pod, score)
			compareDecisions(t, fmt.Sprintf("trial %d round %d", trial, round), got, eg, want, ew)
			ni := rng.IntN(min(n, 1+rng.IntN(4))) // often the first nodes
			if round%2 == 0 {
				ni = rng.IntN(n)
			}
			c.Nodes[ni].FreeCPUMilli = int64(100 * rng.IntN(8))
			c.Changed(ni)
		}
	}
}

// TestClassCache: a cluster is indexed the second decision it is met in;
// the indexes of the last two clusters are kept; a view without a change
// log is never indexed.
func TestClassCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	c1 := classCluster(t, rng)
	c2 := c1.Clone()
	c2.record(0)
	c3 := c1.Clone()
	c3.record(0)
	pol, _ := New("bestfit", Options{Seed: 4})
	ch := chooserOf(pol)
	ch.class.minNodes = 1
	pod := sharePod("s", 1000, 300)
	index := func(c *Cluster) *classIndex {
		for _, ix := range ch.cache.ixs {
			if ix != nil && ix.log == c.log {
				return ix
			}
		}
		return nil
	}
	placeOn := func(c *Cluster, indexed bool) {
		t.Helper()
		if _, err := pol.Place(c, &pod); err != nil {
			t.Fatal(err)
		}
		if (index(c) != nil) != indexed {
			t.Fatalf("indexed %v, want %v", index(c) != nil, indexed)
		}
	}
	placeOn(c1, false)
	placeOn(c1, true)
	first := index(c1)
	placeOn(c2, false)
	placeOn(c1, true)
	placeOn(c2, true)
	placeOn(c1, true)
	if index(c1) != first {
		t.Fatal("the index of a cluster kept in the cache was rebuilt")
	}
	placeOn(view(c1, []int{0, 1, 2}), false)
	placeOn(c3, false)
	placeOn(c3, true)
	if index(c2) != nil || index(c1) != first {
		t.Fatal("the cache did not keep the last two clusters")
	}
}
