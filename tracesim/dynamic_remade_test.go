package tracesim

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
)

// TestReplayDynamicStoppedPodArrivesAnew: a stopped pod waits again as a
// pod made anew (as a controller makes one for an evicted pod): behind
// the pods that arrived before its stop. On one GPU: BE a runs from 0;
// BE b arrives at 10 and waits; LS ls arrives at 20, stops a, and runs
// 30-80. At 80 b, which arrived before a was stopped, goes first; a
// follows when b ends, at 110.
func TestReplayDynamicStoppedPodArrivesAnew(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{placement.NewNode("n", 8000, 65536, 1, "A100-80GB", 81920)}}
	pods := []TimedPod{timedQoS("a", "BE", 1, 1000, 0, 100), timedQoS("b", "BE", 1, 1000, 10, 30), timedQoS("ls", "LS", 1, 1000, 20, 50)}
	for _, try := range []bool{false, true} {
		r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: "bestfit", Seed: 1, Exact: true, Compression: 1,
			Period: 10, Queues: lsBE(true), Preemption: true, Record: true, TryAll: try})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range r.Binds {
			got = append(got, fmt.Sprintf("%s@%g", b.Pod, b.Time))
		}
		if want := []string{"a@0", "ls@30", "b@80", "a@110"}; !slices.Equal(got, want) {
			t.Errorf("TryAll %v: binds %v, want %v", try, got, want)
		}
	}
}
