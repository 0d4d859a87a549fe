package tracesim

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

func timed(name string, gpus int, milli, arrive, dur int64) TimedPod {
	return TimedPod{Pod: placement.Pod{Name: name, CPUMilli: 1000, GPU: request.GPU{Count: gpus, ComputeMilli: milli, ComputeLimitMilli: milli}}, Arrive: arrive, Duration: dur}
}

// TestReplayDynamicKnownTimeline: on one GPU, a whole-GPU pod runs first;
// the next waits until it leaves, and a half-GPU pod after both waits for
// the GPU to be free. Times, delays and allocation follow by hand.
func TestReplayDynamicKnownTimeline(t *testing.T) {
	nodes := &placement.Cluster{Nodes: []placement.Node{placement.NewNode("n", 8000, 65536, 1, "A100-80GB", 81920)}}
	pods := []TimedPod{
		timed("a", 1, 1000, 0, 100), // runs 0-100
		timed("b", 1, 1000, 10, 50), // waits 10-100, runs 100-150
		timed("c", 1, 500, 20, 10),  // waits 20-150, runs 150-160
		timed("never", 2, 1000, 20, 5),
	}
	// Tune = exactly the pods' demand: no copies. Compression 1: the
	// trace's own times.
	r, err := ReplayDynamic(context.Background(), DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: "bestfit", Seed: 1, Tune: 4.5, Compression: 1, Period: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Pods != 4 || r.Started != 3 || r.NeverStarted != 1 {
		t.Fatalf("pods %d, started %d, never started %d; want 4, 3, 1 (two GPUs on a one-GPU node never start)", r.Pods, r.Started, r.NeverStarted)
	}
	if r.Window != 20 {
		t.Errorf("window %v, want 20 (the last arrival)", r.Window)
	}
	// Delays 0, 90, 130: mean 73.3, p50 90, p95 = p99 = 130.
	if math.Abs(r.DelayMean-220.0/3) > 1e-9 || r.DelayP50 != 90 || r.DelayP95 != 130 || r.DelayP99 != 130 {
		t.Errorf("delays mean %v p50 %v p95 %v p99 %v, want 73.3, 90, 130, 130", r.DelayMean, r.DelayP50, r.DelayP95, r.DelayP99)
	}
	// The GPU is whole-allocated to a for the whole window [0, 20].
	if r.AllocatedPct != 100 {
		t.Errorf("time-weighted allocation %v%%, want 100", r.AllocatedPct)
	}
}

// TestReplayDynamicLoadSetsCompression: the compression found for a load
// makes the pods offer that load over the window.
func TestReplayDynamicLoadSetsCompression(t *testing.T) {
	var pods []TimedPod
	for i := int64(0); i < 100; i++ {
		pods = append(pods, timed("p", 1, 1000, i*1000, 500))
	}
	capacity := int64(8000) // 8 GPUs
	k, err := compression(pods, capacity, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	// Window 99000/k; each pod offers 1000 x min(500, window); load =
	// 100 x 1000 x min(500, w) / (8000 x w). With w >= 500: 6250/w = 0.25
	// gives w = 25000, so k = 99000/25000.
	if want := 99000.0 / 25000; math.Abs(k-want) > 1e-6*want {
		t.Errorf("compression %v, want %v", k, want)
	}
	if _, err := compression(pods, capacity, 20); err == nil || !strings.Contains(err.Error(), "cannot offer load 20") {
		t.Errorf("a load above the pods' whole demand: err %v", err)
	}
}

func TestTimedArrivalsReachTune(t *testing.T) {
	pods := []TimedPod{timed("a", 1, 1000, 0, 10), timed("b", 1, 500, 100, 10)}
	out := TimedArrivals(pods, 1000, 5, 7)
	var total int64
	for i, p := range out {
		total += p.Pod.TotalGPUMilli()
		if i > 0 && p.Arrive < out[i-1].Arrive {
			t.Fatalf("arrivals out of order at %d: %v after %v", i, p.Arrive, out[i-1].Arrive)
		}
		if p.Arrive < 0 || p.Arrive > 100 {
			t.Fatalf("copy arrives at %v, outside the trace's span [0, 100]", p.Arrive)
		}
	}
	if total > 5000 || total < 4500 {
		t.Errorf("demand %d, want within one pod of 5000", total)
	}
}

// TestLoadTimedPodsRejectsDeletionBeforeCreation: a row that ends before it
// starts is refused, naming the column and both values.
func TestLoadTimedPodsRejectsDeletionBeforeCreation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods.csv")
	csv := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"p0,1000,1024,1,1000,,LS,Running,100,50,100\n"
	if err := os.WriteFile(path, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadTimedPods(path)
	if err == nil || !strings.Contains(err.Error(), "deletion_time: 50 is before creation_time 100") {
		t.Fatalf("err = %v", err)
	}
}
