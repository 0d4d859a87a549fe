package hostd

import (
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

func TestPublicEnv(t *testing.T) {
	env := []string{
		"AWS_SECRET_ACCESS_KEY=x", "TESSERA_JOB_ID=job-1", "CUDA_VISIBLE_DEVICES=GPU-1", "NVIDIA_VISIBLE_DEVICES=GPU-1",
		"TESSERA_TOKEN=tok", "TESSERA_TOKEN_EXTRA=y", "LD_PRELOAD=/lib.so", "PATH=/bin", "CUDA_MPS_PIPE_DIRECTORY=/p",
		"NOEQUALS", "tessera_lower=1", "XCUDA_Y=1", "=odd",
	}
	want := []string{"TESSERA_JOB_ID=job-1", "CUDA_VISIBLE_DEVICES=GPU-1", "NVIDIA_VISIBLE_DEVICES=GPU-1", "TESSERA_TOKEN_EXTRA=y", "CUDA_MPS_PIPE_DIRECTORY=/p"}
	if got := PublicEnv(env); !slices.Equal(got, want) {
		t.Errorf("PublicEnv = %q\nwant %q", got, want)
	}
	j := Redacted(api.Job{ID: "job-1", Env: env})
	if !j.EnvFiltered || !slices.Equal(j.Env, want) {
		t.Errorf("Redacted = %+v", j)
	}
	if len(env) != 13 || env[0] != "AWS_SECRET_ACCESS_KEY=x" {
		t.Errorf("PublicEnv changed its input: %q", env)
	}
}
