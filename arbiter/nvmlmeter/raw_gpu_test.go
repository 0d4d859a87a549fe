package nvmlmeter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/test/gputest"
)

// TestRawSamplesOnRealGPU logs what NVML's per-process utilisation samples
// look like on this GPU, so the meter's reading of them rests on what the
// hardware reports rather than on the API's one-line description: one
// matmul loop alone; the same loop throttled to about half the GPU (the
// interception library fed by grantfeed, when PREBUILT names a folder with
// both); two loops at once; two loops throttled about 3:1 (with PREBUILT). For each it polls GetProcessUtilization every
// 20 ms for 3 s and logs every new sample (pid, timestamp, SM util) and the
// device's own utilisation samples, and the latency of each call. It
// asserts only that samples were seen.
func TestRawSamplesOnRealGPU(t *testing.T) {
	gputest.Require(t, "PyTorch")
	dev := gpu0(t)
	busy, err := filepath.Abs(busyScript)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func(env ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "python3", busy, "9", "matmul")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	waitOnGPU := func(n int) {
		for {
			procs, _ := dev.GetComputeRunningProcesses()
			if len(procs) >= n {
				time.Sleep(time.Second) // past start-up
				return
			}
			if ctx.Err() != nil {
				t.Fatal("workers never ran on GPU 0")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	poll := func(name string) {
		var last, lastDev uint64
		seen := 0
		perPID := map[uint32]int{} // ticks attributed to each process
		var slow time.Duration
		end := time.Now().Add(3 * time.Second)
		for time.Now().Before(end) {
			t0 := time.Now()
			samples, ret := dev.GetProcessUtilization(last)
			took := time.Since(t0)
			slow = max(slow, took)
			var b strings.Builder
			if ret == nvml.SUCCESS {
				for _, s := range samples {
					if s.TimeStamp > last {
						fmt.Fprintf(&b, " pid=%d ts=%d sm=%d", s.Pid, s.TimeStamp, s.SmUtil)
						seen++
						perPID[s.Pid]++
					}
				}
				for _, s := range samples {
					last = max(last, s.TimeStamp)
				}
			}
			_, ds, dret := dev.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, lastDev)
			if dret == nvml.SUCCESS {
				for _, s := range ds {
					if s.TimeStamp > lastDev {
						fmt.Fprintf(&b, " dev(ts=%d v=%d)", s.TimeStamp, s.SampleValue[0])
						lastDev = max(lastDev, s.TimeStamp)
					}
				}
			}
			if b.Len() > 0 || ret != nvml.SUCCESS {
				t.Logf("%s %s call=%v ret=%v%s", name, time.Now().Format("05.000"), took.Round(time.Millisecond), ret, b.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: %d process samples (by pid %v), slowest call %v", name, seen, perPID, slow)
		if seen == 0 {
			t.Errorf("%s: no per-process samples", name)
		}
	}
	wait := func(cmds ...*exec.Cmd) {
		for _, c := range cmds {
			_ = c.Wait()
		}
	}

	a := start()
	waitOnGPU(1)
	poll("alone")
	wait(a)

	if dir := os.Getenv("PREBUILT"); dir != "" {
		work := t.TempDir()
		region := filepath.Join(work, "g")
		// Calibrate nothing: half of the solo rate measured by busy.py
		// itself is unknown here, so feed 2000 launches/s, about half of
		// an H100/H200's 4096² fp16 matmul rate.
		feed := exec.CommandContext(ctx, filepath.Join(dir, "grantfeed"), "14", region+":2000")
		if err := feed.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		h := start("LD_PRELOAD="+filepath.Join(dir, "libtessera-intercept.so"), "TESSERA_ARBITER_REGION="+region,
			"TESSERA_SHM_DIR="+work, "TESSERA_CONTAINER_ID=half", "BUSY_EVERY=3")
		waitOnGPU(1)
		poll("throttled")
		wait(h)
		_ = feed.Process.Kill()
		_ = feed.Wait()
	}

	b1, b2 := start(), start()
	waitOnGPU(2)
	poll("two")
	wait(b1, b2)

	// Two loops throttled unequally (about 3:1 of GPU time, together
	// about half the GPU): if NVML gives each tick to one process with
	// probability proportional to its GPU time, the ticks split about 3:1.
	if dir := os.Getenv("PREBUILT"); dir != "" {
		work := t.TempDir()
		ra, rb := filepath.Join(work, "ga"), filepath.Join(work, "gb")
		feed := exec.CommandContext(ctx, filepath.Join(dir, "grantfeed"), "14", ra+":1800", rb+":600")
		if err := feed.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		lib := "LD_PRELOAD=" + filepath.Join(dir, "libtessera-intercept.so")
		ua := start(lib, "TESSERA_ARBITER_REGION="+ra, "TESSERA_SHM_DIR="+work, "TESSERA_CONTAINER_ID=ua", "BUSY_EVERY=3")
		ub := start(lib, "TESSERA_ARBITER_REGION="+rb, "TESSERA_SHM_DIR="+work, "TESSERA_CONTAINER_ID=ub", "BUSY_EVERY=3")
		waitOnGPU(2)
		t.Logf("unequal: pids %d (1800/s) and %d (600/s)", ua.Process.Pid, ub.Process.Pid)
		poll("unequal")
		wait(ua, ub)
		_ = feed.Process.Kill()
		_ = feed.Wait()
	}
}
