package tracesim

import (
	"context"
	"math"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
)

func timedQoS(name, qos string, gpus int, milli, arrive, dur int64) TimedPod {
	p := timed(name, gpus, milli, arrive, dur)
	p.QoS = qos
	return p
}

// lsBE is LS and BE as two queues: LS guaranteed the whole cluster, BE
// nothing and preemptible unless told.
func lsBE(bePreemptible bool) *QueueConfig {
	return &QueueConfig{Queues: []QueueSpec{
		{Name: "ls", QoS: []string{"LS"}, Guaranteed: "100%"},
		{Name: "be", QoS: []string{"BE"}, Preemptible: bePreemptible},
	}}
}

// TestReplayDynamicPreemption: on one GPU, a BE pod runs from 0 for 100 s;
// an LS pod arrives at 10 for 50 s. Each case's timeline follows by hand
// (a pod that names victims is placed at the next cycle, one period after
// they stop, on the room they freed, as the cluster's scheduler does):
//   - no preemption: LS waits 10-100 (delay 90).
//   - reclaim (LS guaranteed the GPU, BE above its zero guarantee): BE
//     stops at 10 having run 10 s, LS runs 20-70 (delay 10), BE restarts
//     at 70 from the beginning (delay 60) and runs to 170.
//   - the same in one queue with LS at priority 1: a preemption by
//     priority instead of a reclaim.
//   - BE not preemptible: as without preemption.
//   - a minimum runtime of 20 s: BE is protected until 20 (a cycle is due
//     then), LS runs 30-80 (delay 20), BE restarts at 80 (delay 60).
func TestReplayDynamicPreemption(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{placement.NewNode("n", 8000, 65536, 1, "A100-80GB", 81920)}}
	pods := []TimedPod{timedQoS("be", "BE", 1, 1000, 0, 100), timedQoS("ls", "LS", 1, 1000, 10, 50)}
	oneQueue := &QueueConfig{Queues: []QueueSpec{{Name: "all", QoS: []string{"*"}, Preemptible: true}}, Priorities: map[string]int32{"LS": 1}}
	type queueWant struct {
		delay                float64
		preemptions, reclaim int
		lostGPUSeconds       float64
	}
	for _, tc := range []struct {
		name       string
		queues     *QueueConfig
		preemption bool
		minRuntime float64
		ls, be     queueWant // one queue: its stops and lost time are be's
	}{
		{"no preemption", lsBE(true), false, 0, queueWant{delay: 90}, queueWant{}},
		{"reclaim", lsBE(true), true, 0, queueWant{delay: 10}, queueWant{delay: 60, reclaim: 1, lostGPUSeconds: 10}},
		{"priority", oneQueue, true, 0, queueWant{delay: 10}, queueWant{delay: 60, preemptions: 1, lostGPUSeconds: 10}},
		{"not preemptible", lsBE(false), true, 0, queueWant{delay: 90}, queueWant{}},
		{"minimum runtime", lsBE(true), true, 20, queueWant{delay: 20}, queueWant{delay: 60, reclaim: 1, lostGPUSeconds: 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: "bestfit", Seed: 1, Tune: 2, Compression: 1, Period: 10,
				Queues: tc.queues, Preemption: tc.preemption, MinRuntime: tc.minRuntime})
			if err != nil {
				t.Fatal(err)
			}
			if r.Started != 2 || r.NeverStarted != 0 {
				t.Fatalf("started %d, never started %d; want 2, 0", r.Started, r.NeverStarted)
			}
			wantMean := (tc.ls.delay + tc.be.delay) / 2
			if math.Abs(r.DelayMean-wantMean) > 1e-9 {
				t.Errorf("mean delay %v, want %v", r.DelayMean, wantMean)
			}
			check := func(q QueueResult, w queueWant, pods int) {
				t.Helper()
				if q.Pods != pods || q.Started != pods || math.Abs(q.DelayMean-w.delay) > 1e-9 || q.Preemptions != w.preemptions || q.Reclaims != w.reclaim ||
					math.Abs(q.LostGPUHours-w.lostGPUSeconds/3600) > 1e-12 {
					t.Errorf("queue %s: %+v; want %d pods started, delay %v, preemptions %d, reclaims %d, lost %v GPU-s", q.Queue, q, pods, w.delay, w.preemptions, w.reclaim, w.lostGPUSeconds)
				}
			}
			if tc.queues == oneQueue {
				if len(r.Queues) != 1 {
					t.Fatalf("queues %+v", r.Queues)
				}
				check(r.Queues[0], queueWant{delay: wantMean, preemptions: tc.be.preemptions, lostGPUSeconds: tc.be.lostGPUSeconds}, 2)
			} else {
				if len(r.Queues) != 2 || r.Queues[0].Queue != "ls" || r.Queues[1].Queue != "be" {
					t.Fatalf("queues %+v, want ls then be", r.Queues)
				}
				check(r.Queues[0], tc.ls, 1)
				check(r.Queues[1], tc.be, 1)
			}
			if r.Preemptions != tc.be.preemptions || r.Reclaims != tc.be.reclaim {
				t.Errorf("totals: preemptions %d reclaims %d, want %d %d", r.Preemptions, r.Reclaims, tc.be.preemptions, tc.be.reclaim)
			}
			// The window is [0, 10]: BE holds the GPU all of it.
			if r.AllocatedPct != 100 {
				t.Errorf("allocation %v%%, want 100", r.AllocatedPct)
			}
		})
	}
}

// TestReplayDynamicPerQueueAllocation: two GPUs; LS takes one from 0 to
// 100, BE one from 50 to 150; the window is [0, 50] (the last arrival), so
// LS holds 50% of the cluster over it and BE none; a third pod arriving at
// 100 makes the window [0, 100]: LS 50%, BE 25%, overall 75%.
func TestReplayDynamicPerQueueAllocation(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{placement.NewNode("n", 8000, 65536, 2, "A100-80GB", 81920)}}
	pods := []TimedPod{timedQoS("ls", "LS", 1, 1000, 0, 100), timedQoS("be", "BE", 1, 1000, 50, 100), timedQoS("late", "LS", 1, 1000, 100, 10)}
	r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: "bestfit", Seed: 1, Tune: 1.5, Compression: 1, Period: 10, Queues: lsBE(true)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Window != 100 || r.AllocatedPct != 75 || r.Queues[0].AllocatedPct != 50 || r.Queues[1].AllocatedPct != 25 {
		t.Errorf("window %v, allocation %v%% (ls %v%%, be %v%%); want 100, 75 (50, 25)", r.Window, r.AllocatedPct, r.Queues[0].AllocatedPct, r.Queues[1].AllocatedPct)
	}
	// The series says the same per queue at the cycle at 50.
	for _, s := range r.Series {
		if s.Time == 50 && (len(s.Queues) != 2 || s.Queues[0].AllocatedPct != 50 || s.Queues[1].AllocatedPct != 50 || s.AllocatedPct != 100) {
			t.Errorf("sample at 50: %+v; want 100%%, ls 50%%, be 50%%", s)
		}
	}
}

// TestReplayDynamicGangReclaims: two one-GPU nodes, each running a BE pod
// from 0 for 100 s; a two-GPU LS pod, a gang of two one-GPU members,
// arrives at 10 for 50 s. The gang reclaims both GPUs at once (the BE
// pods stop at 10, having run 10 s each), runs 20-70 across the two
// nodes (placed at the next cycle: delay 10), and the BE pods restart at
// 70 (delay 60 each).
func TestReplayDynamicGangReclaims(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{
		placement.NewNode("a", 8000, 65536, 1, "A100-80GB", 81920),
		placement.NewNode("b", 8000, 65536, 1, "A100-80GB", 81920),
	}}
	pods := []TimedPod{timedQoS("be-a", "BE", 1, 1000, 0, 100), timedQoS("be-b", "BE", 1, 1000, 0, 100), timedQoS("ls", "LS", 2, 1000, 10, 50)}
	r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: "bestfit", Seed: 1, Tune: 2, Compression: 1, Period: 10,
		Queues: lsBE(true), Preemption: true, Gangs: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Started != 3 || r.NeverStarted != 0 {
		t.Fatalf("started %d, never started %d; want 3, 0", r.Started, r.NeverStarted)
	}
	if len(r.Queues) != 2 || r.Queues[0].Queue != "ls" || r.Queues[1].Queue != "be" {
		t.Fatalf("queues %+v, want ls then be", r.Queues)
	}
	ls, be := r.Queues[0], r.Queues[1]
	if ls.DelayMean != 10 || be.DelayMean != 60 || be.Reclaims != 2 || math.Abs(be.LostGPUHours-20.0/3600) > 1e-12 {
		t.Errorf("ls %+v, be %+v; want ls delay 10, be delay 60 with 2 reclaims and 20 GPU-s lost", ls, be)
	}
}

// TestReplayDynamicHoldsThePreemptorsRoom: two one-GPU nodes; ls-old runs
// on one from 0 to 1000, be on the other from 0 to 100; LS is guaranteed
// 1.5 GPUs. early (LS, one GPU, 10 s) arrives at 5 and p (LS, half a GPU,
// 50 s) at 10: at the cycle at 10 early fits nowhere and may not reclaim
// (LS would go over its guarantee), p reclaims be, which stops. At 20
// early is served before p (it arrived first) and would fit in be's
// room, but that room is p's: p runs 20-70 (delay 10), early fits only
// once p ends, 70-80 (delay 65), and be restarts at 80 (delay 70).
func TestReplayDynamicHoldsThePreemptorsRoom(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{
		placement.NewNode("a", 8000, 65536, 1, "A100-80GB", 81920),
		placement.NewNode("b", 8000, 65536, 1, "A100-80GB", 81920),
	}}
	pods := []TimedPod{timedQoS("ls-old", "LS", 1, 1000, 0, 1000), timedQoS("be", "BE", 1, 1000, 0, 100),
		timedQoS("early", "LS", 1, 1000, 5, 10), timedQoS("p", "LS", 1, 500, 10, 50)}
	queues := &QueueConfig{Queues: []QueueSpec{
		{Name: "ls", QoS: []string{"LS"}, Guaranteed: "1.5"},
		{Name: "be", QoS: []string{"BE"}, Preemptible: true},
	}}
	r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: "bestfit", Seed: 1, Tune: 1.75, Compression: 1, Period: 10, // 1.75: these pods, no copies
		Queues: queues, Preemption: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Started != 4 || r.Reclaims != 1 {
		t.Fatalf("started %d, reclaims %d; want 4, 1", r.Started, r.Reclaims)
	}
	ls, be := r.Queues[0], r.Queues[1]
	if want := (0 + 65 + 10) / 3.0; math.Abs(ls.DelayMean-want) > 1e-9 || be.DelayMean != 70 {
		t.Errorf("ls delay mean %v, be %v; want %v (ls-old 0, early 65, p 10) and 70", ls.DelayMean, be.DelayMean, want)
	}
}
