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
// an LS pod arrives at 10 for 50 s. Each case's timeline follows by hand:
//   - no preemption: LS waits 10-100 (delay 90).
//   - reclaim (LS guaranteed the GPU, BE above its zero guarantee): BE
//     stops at 10 having run 10 s, LS runs 10-60, BE restarts at 60 from
//     the beginning (delay 50) and runs to 160.
//   - the same in one queue with LS at priority 1: a preemption by
//     priority instead of a reclaim.
//   - BE not preemptible: as without preemption.
//   - a minimum runtime of 20 s: BE is protected until 20 (a cycle is due
//     then), LS runs 20-70 (delay 10), BE restarts at 70 (delay 50).
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
		{"reclaim", lsBE(true), true, 0, queueWant{}, queueWant{delay: 50, reclaim: 1, lostGPUSeconds: 10}},
		{"priority", oneQueue, true, 0, queueWant{}, queueWant{delay: 50, preemptions: 1, lostGPUSeconds: 10}},
		{"not preemptible", lsBE(false), true, 0, queueWant{delay: 90}, queueWant{}},
		{"minimum runtime", lsBE(true), true, 20, queueWant{delay: 10}, queueWant{delay: 50, reclaim: 1, lostGPUSeconds: 20}},
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
// pods stop at 10, having run 10 s each), runs 10-60 across the two
// nodes, and the BE pods restart at 60 (delay 50 each).
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
	if ls.DelayMean != 0 || be.DelayMean != 50 || be.Reclaims != 2 || math.Abs(be.LostGPUHours-20.0/3600) > 1e-12 {
		t.Errorf("ls %+v, be %+v; want ls delay 0, be delay 50 with 2 reclaims and 20 GPU-s lost", ls, be)
	}
}
