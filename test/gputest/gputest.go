package gputest

import (
	"os"
	"testing"
)

// Env enables the checks that need a real GPU when set to "1"
// (docs/gpu-validation.md runs them).
const Env = "TESSERA_GPU_TESTS"

// Require skips t unless Env is "1"; needs says what the machine must
// have besides the GPU ("PyTorch", "MPS and PyTorch").
func Require(t testing.TB, needs string) {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Skipf("set %s=1 on a machine with an NVIDIA GPU and %s", Env, needs)
	}
}
