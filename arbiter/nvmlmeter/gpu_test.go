package nvmlmeter

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/shareenv"
	"github.com/tessera-gpu/tessera/test/gputest"
)

// TestOnRealGPU measures a matmul loop and a tiny-kernel loop through the
// real NVML, each resolved by its TESSERA_CONTAINER_ID and by its process
// tree, and logs every reading. It asserts only what any GPU shows: the
// readings' spans add up to about the time polled (the ticks follow the
// clock), no client is busy longer than a reading's span nor all clients
// together, and the matmul loop is measured, busy at least half of some
// reading.
func TestOnRealGPU(t *testing.T) {
	gputest.Require(t, "PyTorch")
	dev := gpu0(t)
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU 0 UUID: %v", ret)
	}
	busy := busyScript
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	roots := map[int]string{}
	start := func(key, mode string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "python3", busy, "15", mode)
		cmd.Env = append(os.Environ(), shareenv.ContainerID+"="+key)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		roots[cmd.Process.Pid] = key
		return cmd
	}
	matmul, launch := start("gpucheck-matmul", "matmul"), start("gpucheck-launch", "launch")
	defer func() {
		for _, c := range []*exec.Cmd{matmul, launch} {
			if err := c.Wait(); err != nil {
				t.Errorf("%s: %v", strings.Join(c.Args, " "), err)
			}
		}
	}()
	// PyTorch takes seconds to start: wait until both run on the GPU.
	for up := false; !up; {
		procs, ret := dev.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			t.Fatalf("GetComputeRunningProcesses: %v", ret)
		}
		seen := 0
		for _, p := range procs {
			if _, ok := roots[int(p.Pid)]; ok {
				seen++
			}
		}
		if up = seen == len(roots); !up {
			if ctx.Err() != nil {
				t.Fatal("the workers never ran on GPU 0")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for name, r := range map[string]Resolver{
		"environ": Environ{},
		"tree":    ProcTree{Roots: func(context.Context) (map[int]string, error) { return roots, nil }},
	} {
		m, err := Open(nvml.New(), Options{Resolver: r})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Read(ctx, uuid, nil); err != nil { // the baseline
			t.Fatalf("%s: Read: %v", name, err)
		}
		start := time.Now()
		var span time.Duration
		total := map[string]time.Duration{}
		maxBusy, measured := 0.0, 0
		for time.Since(start) < 4*time.Second {
			time.Sleep(50 * time.Millisecond) // the arbiter's period
			r, err := m.Read(ctx, uuid, []string{"gpucheck-matmul", "gpucheck-launch"})
			if err != nil {
				t.Fatalf("%s: Read: %v", name, err)
			}
			if r.Span == 0 {
				continue
			}
			t.Logf("%s: %s span %v busy %v", name, time.Now().Format("15:04:05.000"), r.Span, r.Busy)
			span += r.Span
			var sum time.Duration
			for k, v := range r.Busy {
				if v < 0 || v > r.Span {
					t.Errorf("%s: busy[%s] = %v, outside [0, %v]", name, k, v, r.Span)
				}
				sum += v
				total[k] += v
			}
			if sum > r.Span {
				t.Errorf("%s: the clients were busy %v together in %v", name, sum, r.Span)
			}
			if v, ok := r.Busy["gpucheck-matmul"]; ok && v > 0 {
				measured++
				maxBusy = max(maxBusy, v.Seconds()/r.Span.Seconds())
			}
		}
		elapsed := time.Since(start)
		t.Logf("%s: %v of ticks in %v; busy %v; matmul measured in %d readings, max busy %.2f of a span",
			name, span, elapsed.Round(time.Millisecond), total, measured, maxBusy)
		if span < elapsed/2 || span > elapsed*3/2 {
			t.Errorf("%s: the readings spanned %v in %v", name, span, elapsed)
		}
		if measured == 0 || maxBusy < 0.5 {
			t.Errorf("%s: the matmul loop was measured %d times, max %.2f; want at least once, ≥ 0.5", name, measured, maxBusy)
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}
}

// busyScript is the GPU worker the real-GPU tests run (from this folder).
const busyScript = "../../intercept/gpu-validation/busy.py"

// gpu0 initialises the real NVML and returns GPU 0; NVML is shut down
// when the test ends.
func gpu0(t *testing.T) nvml.Device {
	t.Helper()
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatalf("nvmlInit: %v", ret)
	}
	t.Cleanup(func() { lib.Shutdown() })
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU 0: %v", ret)
	}
	return dev
}
