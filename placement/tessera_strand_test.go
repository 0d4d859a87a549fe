package placement

import (
	"math"
	"math/rand/v2"
	"testing"
)

// strandDist is a distribution whose GPU pods ask 2 or 30 CPUs per GPU
// (half the GPU each) and whose CPU-only pods ask cpuOnly milli.
func strandDist(cpuOnly int64) Distribution {
	return dist(
		Typical{Shape: Shape{CPUMilli: 2000, GPUMilli: 1000, GPUCount: 1}, Weight: 0.25},
		Typical{Shape: Shape{CPUMilli: 30000, GPUMilli: 1000, GPUCount: 1}, Weight: 0.25},
		Typical{Shape: Shape{CPUMilli: cpuOnly}, Weight: 0.5},
	)
}

func TestHostNeedMeanAndExpectation(t *testing.T) {
	cpu, _ := hostNeeds(strandDist(12000))
	if cpu.mean != 16 {
		t.Fatalf("mean CPU need = %v milli per GPU milli, want 16", cpu.mean)
	}
	// (0.25*2000 + 0.25*30000 + 0.5*12000) / (0.5*1000)
	if cpu.demand != 28 {
		t.Fatalf("demand = %v, want 28", cpu.demand)
	}
	tests := []struct {
		name      string
		gpu, free int64
		scarce    bool
		want      float64
	}{
		{"plentiful: the mean feeds 1000m with 16 CPUs", 1000, 16000, false, 0},
		{"plentiful: 8 CPUs feed half", 1000, 8000, false, 500},
		{"scarce: 40 CPUs feed every pod", 1000, 40000, true, 0},
		{"scarce: 18 CPUs leave the heavy pods short", 1000, 18000, true, 0.5 * (1000 - 18000.0/30)},
		{"scarce: 1 CPU leaves both short", 1000, 1000, true, 0.5*(1000-1000.0/2) + 0.5*(1000-1000.0/30)},
		{"no free GPU strands nothing", 0, 0, true, 0},
		{"no free CPU strands every GPU", 2000, 0, true, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cpu.stranded(tt.gpu, tt.free, tt.scarce); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("stranded(%d, %d, scarce=%v) = %v, want %v", tt.gpu, tt.free, tt.scarce, got, tt.want)
			}
		})
	}
}

// The expectation over the pods' needs is what a brute-force sum gives;
// with one need for every pod it is the mean's.
func TestHostNeedExpectationMatchesSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		var d Distribution
		for k := 0; k < 1+rng.IntN(6); k++ {
			count := 1 + rng.IntN(4)
			milli := int64(1000)
			if count == 1 && rng.IntN(2) == 0 {
				milli = int64(50 + rng.IntN(900))
			}
			d = append(d, Typical{Shape: Shape{CPUMilli: int64(rng.IntN(64000)), GPUMilli: milli, GPUCount: count}, Weight: rng.Float64() + 0.01})
		}
		cpu, _ := hostNeeds(d)
		var total float64
		for _, x := range d {
			total += x.Weight * float64(x.Shape.GPUMilli) * float64(x.Shape.GPUCount)
		}
		g, c := int64(rng.IntN(8001)), int64(rng.IntN(96001))
		var want float64
		for _, x := range d {
			gpu := float64(x.Shape.GPUMilli) * float64(x.Shape.GPUCount)
			if r := float64(x.Shape.CPUMilli) / gpu; r > 0 {
				want += x.Weight * gpu / total * math.Max(0, float64(g)-float64(c)/r)
			}
		}
		got := cpu.stranded(g, c, true)
		if math.Abs(got-want) > 1e-6*math.Max(1, want) {
			t.Fatalf("trial %d: stranded(%d, %d) = %v, brute force %v (%+v)", trial, g, c, got, want, d)
		}
	}
	one, _ := hostNeeds(dist(Typical{Shape: Shape{CPUMilli: 12000, GPUMilli: 1000, GPUCount: 2}, Weight: 1}))
	for c := int64(0); c <= 30000; c += 1500 {
		if a, b := one.stranded(2000, c, true), one.stranded(2000, c, false); math.Abs(a-b) > 1e-9 {
			t.Fatalf("one need, %d CPU milli free: expectation %v, mean %v", c, a, b)
		}
	}
}

func TestTesseraScarceCPUKeepsNodesForCPUHeavyPods(t *testing.T) {
	// Two nodes with one free GPU each; a 12-CPU CPU-only pod arrives.
	// At the mean need (16 CPUs per GPU) both nodes keep enough, so the
	// nodes tie and the seeded order decides. When the workload asks more
	// CPU per GPU than the cluster has (45 per GPU here), the pods that
	// ask 30 CPUs per GPU will not find a node with room to spare, so the
	// 30-CPU node is kept for them and the pod goes to the 60-CPU node.
	mk := func() *Cluster {
		return &Cluster{Nodes: []Node{NewNode("rich", 60000, 0, 1, "T4", 0), NewNode("lean", 30000, 0, 1, "T4", 0)}}
	}
	plentiful, scarce := strandDist(12000), strandDist(60000)
	leanChosen := 0
	for seed := uint64(0); seed < 20; seed++ {
		if got := place(t, mk(), NewTessera(scarce, seed), cpuPod("cpu", 12000)); got.Node != 0 {
			t.Fatalf("scarce CPU, seed %d: CPU-only pod went to node %d, want the 60-CPU node", seed, got.Node)
		}
		if got := place(t, mk(), NewTessera(plentiful, seed), cpuPod("cpu", 12000)); got.Node == 1 {
			leanChosen++
		}
	}
	if leanChosen == 0 {
		t.Fatal("plentiful CPU: the CPU-only pod never went to the 30-CPU node; the nodes should tie and the seeded order decide")
	}
}

func TestTesseraScarceMemoryMakesTheWorkloadHostBound(t *testing.T) {
	// CPU is plentiful (28 CPU milli per GPU milli asked, 45 on offer), but
	// the CPU-only pods ask more memory per GPU than the nodes have: pods
	// will be turned away by host resources, so CPU is kept for the
	// CPU-heavy GPU pods as when CPU itself is scarce.
	d := strandDist(12000)
	for i := range d {
		d[i].MemoryMiB = 1000
	}
	d[2].MemoryMiB = 400000 // CPU-only pods: 0.5*400000 / 500 = 400 MiB per GPU milli
	for seed := uint64(0); seed < 20; seed++ {
		c := &Cluster{Nodes: []Node{NewNode("rich", 60000, 100000, 1, "T4", 0), NewNode("lean", 30000, 100000, 1, "T4", 0)}}
		if got := place(t, c, NewTessera(d, seed), Pod{Name: "cpu", CPUMilli: 12000, MemoryMiB: 1000}); got.Node != 0 {
			t.Fatalf("seed %d: CPU-only pod went to node %d, want the 60-CPU node", seed, got.Node)
		}
	}
}

func TestScoreCutsMatchIntegerScore(t *testing.T) {
	cuts := newScoreCuts()
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(cost float64) {
		if got, want := cuts.score(cost), integerScore(cost); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("score(%v) = %v, integerScore = %v", cost, got, want)
		}
	}
	for _, c := range cuts {
		for _, d := range []float64{0, 1e-12, -1e-12, 1e-7, -1e-7, 1e-3, -1e-3} {
			check(c + d)
		}
		check(math.Nextafter(c, math.Inf(1)))
		check(math.Nextafter(c, math.Inf(-1)))
	}
	for _, c := range []float64{0, math.Copysign(0, -1), 1e9, -1e9, math.Inf(1), math.Inf(-1), math.NaN(), 4595.12, -4595.12} {
		check(c)
	}
	for range 200000 {
		check((rng.Float64() - 0.5) * 12000)
	}
}
