package tracesim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
)

func TestGangMembersSplitCPUAndMemory(t *testing.T) {
	p := timed("big", 3, 1000, 0, 10).Pod
	p.CPUMilli, p.MemoryMiB = 1000, 4097
	p.GPU.Models = []string{"A100-80GB"}
	ms := gangMembers(p)
	if len(ms) != 3 {
		t.Fatalf("%d members, want 3", len(ms))
	}
	var cpu, mem int64
	for i, m := range ms {
		cpu += m.CPUMilli
		mem += m.MemoryMiB
		if m.GPU.Count != 1 || m.GPU.ComputeMilli != 1000 || len(m.GPU.Models) != 1 || m.Name != "big/"+string(rune('0'+i)) {
			t.Errorf("member %d: %+v; want one whole GPU of the pod's models, named big/%d", i, m, i)
		}
	}
	if cpu != 1000 || mem != 4097 || ms[0].CPUMilli != 334 || ms[2].CPUMilli != 333 || ms[0].MemoryMiB != 1366 || ms[1].MemoryMiB != 1366 || ms[2].MemoryMiB != 1365 {
		t.Errorf("members %+v: want CPU 334+333+333 and memory 1366+1366+1365", ms)
	}
}

// TestReplayDynamicGangs: two nodes of one GPU each. A two-GPU pod fits
// no single node, so without gangs it never starts; as a gang of two
// one-GPU members it takes both nodes at once. With a one-GPU pod holding
// one node from 0 to 50, the gang (arriving at 10) waits whole until 50:
// all or nothing, never one member alone.
func TestReplayDynamicGangs(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{
		placement.NewNode("a", 8000, 65536, 1, "A100-80GB", 81920),
		placement.NewNode("b", 8000, 65536, 1, "A100-80GB", 81920),
	}}
	for _, tc := range []struct {
		name         string
		pods         []TimedPod
		gangs        bool
		neverStarted int
		delays       []float64 // mean, p99
		samples      map[float64]float64
	}{
		{"no gangs", []TimedPod{timed("pair", 2, 1000, 0, 100)}, false, 1, []float64{0, 0}, map[float64]float64{0: 0}},
		{"gang", []TimedPod{timed("pair", 2, 1000, 0, 100)}, true, 0, []float64{0, 0}, map[float64]float64{0: 100}},
		{"gang waits whole", []TimedPod{timed("one", 1, 1000, 0, 50), timed("pair", 2, 1000, 10, 100)}, true, 0, []float64{20, 40},
			map[float64]float64{0: 50, 10: 50, 50: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: tc.pods, Policy: "bestfit", Seed: 1, Tune: 1.5, Compression: 1, Period: 10, Gangs: tc.gangs})
			if err != nil {
				t.Fatal(err)
			}
			if r.Pods != len(tc.pods) || r.NeverStarted != tc.neverStarted {
				t.Errorf("pods %d, never started %d; want %d, %d", r.Pods, r.NeverStarted, len(tc.pods), tc.neverStarted)
			}
			if r.DelayMean != tc.delays[0] || r.DelayP99 != tc.delays[1] {
				t.Errorf("delay mean %v p99 %v, want %v", r.DelayMean, r.DelayP99, tc.delays)
			}
			seen := 0
			for _, s := range r.Series {
				if want, ok := tc.samples[s.Time]; ok {
					seen++
					if s.AllocatedPct != want {
						t.Errorf("allocated at %v: %v%%, want %v%%", s.Time, s.AllocatedPct, want)
					}
				}
			}
			if seen != len(tc.samples) {
				t.Errorf("series %+v lacks some of the times %v", r.Series, tc.samples)
			}
		})
	}
}

// TestDynamicQueueOutputs: the per-queue tables, the per-queue series and
// the SVG plots of replays run with queues.
func TestDynamicQueueOutputs(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{placement.NewNode("n", 8000, 65536, 1, "A100-80GB", 81920)}}
	pods := []TimedPod{timedQoS("be", "BE", 1, 1000, 0, 100), timedQoS("ls", "LS", 1, 1000, 10, 50)}
	var rs []*DynamicResult
	for _, pol := range []string{"bestfit", "fgd"} {
		r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: pol, Seed: 7, Tune: 2, Compression: 1, Period: 10, Queues: lsBE(true), Preemption: true})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	table := DynamicQueueTable(rs)
	for _, want := range []string{"| t | bestfit | 7 | ls | 1 | 0.00 | 0 | 10 | 10 | 10 | 10 | 0 | 0 | 0.0 |", "| t | fgd | 7 | be | 1 | 100.00 | 0 | 60 | 60 | 60 | 60 | 0 | 1 | 0.0 |"} {
		if !strings.Contains(table, want) {
			t.Errorf("queue table lacks %q:\n%s", want, table)
		}
	}
	if means := DynamicQueueMeans(rs); !strings.Contains(means, "| t | fgd | be | 1 | 100.00 | 0.0 | 60.0 | 60.0 | 60.0 | 60.0 | 0.0 | 1.0 | 0.0 |") {
		t.Errorf("queue means:\n%s", means)
	}
	if DynamicQueueTable([]*DynamicResult{{Trace: "x"}}) != "" || DynamicQueueMeans(nil) != "" {
		t.Error("results without queues should give no queue tables")
	}
	var b bytes.Buffer
	if err := WriteQueueSeriesCSV(&b, rs[:1]); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "trace,policy,seed,time_s,queue,allocated_pct,waiting\nt,bestfit,7,0.000,ls,0.0000,0\nt,bestfit,7,0.000,be,100.0000,0\nt,bestfit,7,10.000,ls,0.0000,1\nt,bestfit,7,10.000,be,0.0000,1\nt,bestfit,7,20.000,ls,100.0000,0\n") {
		t.Errorf("queue series:\n%s", b.String())
	}
	dir := t.TempDir()
	paths, err := WriteDynamicPlots(dir, rs)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || paths[0] != filepath.Join(dir, "dynamic_t_seed7.svg") {
		t.Fatalf("plots %v, want one for trace t, seed 7", paths)
	}
	svg, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "bestfit", "fgd", "queue ls", "queue be", "waiting pods"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the plot lacks %q", want)
		}
	}
}
