package hostd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/arbiter/mps/mpstest"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/request"
)

// mpsHost is a daemon sharing GPUs with MPS through the real node arbiter,
// whose control program is the fake of package mpstest.
type mpsHost struct {
	*testDaemon
	arb *arbiter.Arbiter
}

func startMPSDaemon(t *testing.T, spec string) mpsHost {
	t.Helper()
	cfg := testConfig(t, t.TempDir(), spec)
	var uuids []string
	for _, n := range cfg.Nodes {
		for _, g := range n.GPUs {
			uuids = append(uuids, g.UUID)
		}
	}
	arb, err := arbiter.New(arbiter.Config{Mode: arbiter.ModeMPS, Logger: cfg.Log,
		MPS: mps.Config{Binary: mpstest.Write(t), Root: mpstest.ShortDir(t), GPUs: uuids}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = arb.Run(ctx)
	}()
	// Registered before startDaemon's cleanup, so run after it: the
	// daemon stops first, then the arbiter and its MPS daemons.
	t.Cleanup(func() {
		cancel()
		<-done
	})
	d := startDaemon(t, cfg.StateDir, spec, func(c *Config) {
		c.Sharing = arbiter.ModeMPS
		c.Arbiter = ArbiterSeat{Enforcer: arbiter.Enforcer{Arbiter: arb}, Log: cfg.Log}
	})
	return mpsHost{testDaemon: d, arb: arb}
}

// On an MPS host, a job is started with its GPU's MPS pipe folder, its
// compute limit as the active thread percentage and its memory limit as
// the pinned memory limit of its one device, replacing any the client
// had; the GPU's control daemon was started on that pipe folder.
func TestMPSJobEnvironment(t *testing.T) {
	h := startMPSDaemon(t, "2xH200")
	j, err := h.Submit(api.SubmitRequest{
		GPU:     map[string]string{"compute": "0.25", "compute-limit": "0.45", "memory": "10Gi", "memory-limit": "20Gi"},
		Command: []string{"/bin/sh", "-c", `printf '%s\n' "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" "$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" "$CUDA_VISIBLE_DEVICES"`},
		Env:     []string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", "PATH=/usr/bin:/bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = h.Wait(context.Background(), j.ID); err != nil || j.State != api.Succeeded {
		t.Fatalf("job: %+v, %v", j, err)
	}
	if len(j.Shares) != 1 {
		t.Fatalf("shares %+v, want one GPU", j.Shares)
	}
	gpu := j.Shares[0].UUID
	pipe := h.arb.MPS().PipeDir(gpu)
	out, err := os.ReadFile(filepath.Join(h.JobDir(j.ID), "stdout.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{pipe, "45", "0=20480M", gpu}
	if got := strings.Split(strings.TrimSpace(string(out)), "\n"); !slices.Equal(got, want) {
		t.Errorf("job's CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, CUDA_VISIBLE_DEVICES = %q, want %q", got, want)
	}
	// The job's GPU's control daemon runs on that pipe folder, for that GPU.
	eventually(t, "the MPS daemon of "+gpu, func() bool { return mpstest.Running(pipe) })
	started := "start visible=" + gpu + " pipe=" + pipe + " "
	if log := mpstest.Log(t, h.arb.MPS().LogDir(gpu)); len(log) == 0 || !strings.HasPrefix(log[0], started) {
		t.Errorf("control daemon log %q, want it started as %q...", log, started)
	}
	if st, err := h.Status(); err != nil || st.Sharing != "mps" {
		t.Errorf("status sharing %q (%v), want mps", st.Sharing, err)
	}
}

// On an MPS host a job of more than one GPU is refused at submission,
// naming the GPU count and why, and nothing is queued; MIG jobs are not MPS
// clients and keep their count.
func TestMPSRefusesMultiGPUJobs(t *testing.T) {
	h := startMPSDaemon(t, "2xH200")
	_, err := h.Submit(api.SubmitRequest{GPU: map[string]string{"count": "2"}, Command: []string{"/bin/true"}})
	var ie *InputError
	if !errors.As(err, &ie) || ie.Field != request.FieldCount || !strings.Contains(ie.Msg, "must be 1 on this host, got 2") || !strings.Contains(ie.Msg, "MPS") {
		t.Fatalf("err = %v, want an InputError on %s saying a job takes one GPU with MPS", err, request.FieldCount)
	}
	if jobs, _ := h.Jobs(); len(jobs) != 0 {
		t.Errorf("a refused submission queued %d jobs", len(jobs))
	}
	// A MIG job of two instances is not refused for its count (these
	// GPUs are not in MIG mode, so it is refused for its profile).
	_, err = h.Submit(api.SubmitRequest{GPU: map[string]string{"count": "2", "mig-profile": "1g.18gb"}, Command: []string{"/bin/true"}})
	if !errors.As(err, &ie) || ie.Field != request.FieldMIGProfile {
		t.Fatalf("MIG job of two instances: %v, want a refusal of its profile only", err)
	}
}

// MPS sharing needs the node arbiter; a daemon of any other sharing mode
// is refused.
func TestSharingConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		mode arbiter.Mode
		want string
	}{
		{"mps without an arbiter", arbiter.ModeMPS, "arbiter: must be set when sharing is mps"},
		{"unknown mode", arbiter.Mode(7), "sharing: must be tokens or mps, got Mode(7)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir(), "1xH200")
			cfg.Sharing = tt.mode
			if d, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				if d != nil {
					_ = d.Close()
				}
				t.Fatalf("New: %v, want %q", err, tt.want)
			}
		})
	}
}
