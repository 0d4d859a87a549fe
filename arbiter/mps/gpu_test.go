package mps

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/test/gputest"
)

// TestOnRealMPS runs the real control daemon on GPU 0 under the
// supervisor, then a matmul loop as an MPS client capped at 30 % and one
// at 100 %, and logs their speeds. It asserts what must hold anywhere: the
// daemon answers, both clients run to the end, an MPS server served them,
// and the daemon is gone once Run has returned.
func TestOnRealMPS(t *testing.T) {
	gputest.Require(t, "MPS and PyTorch")
	out, err := exec.Command("nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", "0").Output()
	if err != nil {
		t.Fatalf("nvidia-smi: %v", err)
	}
	uuid := strings.TrimSpace(string(out))
	root, err := os.MkdirTemp("", "mps")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	s, err := New(Config{Root: root, GPUs: []string{uuid}, CheckEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	for {
		if s.healthy(ctx, uuid) == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the MPS control daemon never answered")
		}
		time.Sleep(200 * time.Millisecond)
	}
	busy := filepath.Join("..", "..", "intercept", "gpu-validation", "busy.py")
	speed := func(limit int64) float64 {
		env, err := ClientEnv(s.PipeDir(uuid), binding.Share{UUID: uuid, ComputeMilli: limit, ComputeLimitMilli: limit, MemoryMiB: 4096, MemoryLimitMiB: 4096})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "python3", busy, "8", "matmul")
		cmd.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES="+uuid)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("client at %d thousandths: %v", limit, err)
		}
		var res struct {
			ItersPerS float64 `json:"iters_per_s"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("client output %q: %v", stdout.String(), err)
		}
		t.Logf("MPS client, env %v: %.1f matmuls/s", env, res.ItersPerS)
		return res.ItersPerS
	}
	capped, full := speed(300), speed(1000)
	t.Logf("capped/full = %.2f (30 %% of the SMs; matmul throughput should be near 0.3)", capped/full)
	servers, err := s.Control(ctx, uuid, "get_server_list")
	t.Logf("get_server_list: %q, %v", servers, err)
	if err != nil || strings.TrimSpace(servers) == "" {
		t.Errorf("no MPS server served the clients")
	}
	if data, err := os.ReadFile(filepath.Join(s.LogDir(uuid), "control.log")); err == nil {
		t.Logf("control.log:\n%s", data)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for {
		if s.healthy(ctx, uuid) != nil {
			break // the daemon has quit
		}
		if ctx.Err() != nil {
			t.Fatal("the MPS control daemon still answers after quit")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
