package nvmlmeter

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/gputest"
	"github.com/tessera-gpu/tessera/shareenv"
)

// TestOnRealGPU measures a matmul loop and a tiny-kernel loop through the
// real NVML, each resolved by its TESSERA_CONTAINER_ID and by its process
// tree, and logs every measurement. It asserts only what any GPU shows: the
// matmul loop is measured, busy at least half the time, and every value is
// in [0, 1].
func TestOnRealGPU(t *testing.T) {
	gputest.Require(t, "PyTorch")
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatalf("nvmlInit: %v", ret)
	}
	defer lib.Shutdown()
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU 0: %v", ret)
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU 0 UUID: %v", ret)
	}
	busy := filepath.Join("..", "..", "intercept", "gpu-validation", "busy.py")
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
		maxBusy, measured := 0.0, 0
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) {
			b, err := m.Busy(ctx, uuid, []string{"gpucheck-matmul", "gpucheck-launch"})
			if err != nil {
				t.Fatalf("%s: Busy: %v", name, err)
			}
			if len(b) > 0 {
				t.Logf("%s: %s busy %v", name, time.Now().Format("15:04:05.000"), b)
			}
			for k, v := range b {
				if v < 0 || v > 1 {
					t.Errorf("%s: busy[%s] = %v, outside [0, 1]", name, k, v)
				}
			}
			if v, ok := b["gpucheck-matmul"]; ok {
				measured++
				maxBusy = max(maxBusy, v)
			}
			time.Sleep(50 * time.Millisecond) // the arbiter's period
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		t.Logf("%s: matmul measured in %d periods, max busy %.2f", name, measured, maxBusy)
		if measured == 0 || maxBusy < 0.5 {
			t.Errorf("%s: the matmul loop was measured %d times, max %.2f; want at least once, ≥ 0.5", name, measured, maxBusy)
		}
	}
}
