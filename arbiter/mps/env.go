package mps

import (
	"fmt"

	"github.com/tessera-gpu/tessera/binding"
)

// Client environment variables MPS reads (CUDA driver, Volta and later).
const (
	EnvPipeDir          = "CUDA_MPS_PIPE_DIRECTORY"
	EnvLogDir           = "CUDA_MPS_LOG_DIRECTORY"
	EnvThreadPercentage = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	EnvPinnedMemLimit   = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
)

// ThreadPercentage maps a compute limit in thousandths, [1, 1000], to an
// MPS active thread percentage, [1, 100], rounding up so a limit is never
// cut below what was granted (MPS itself rounds to whole SMs, also up).
func ThreadPercentage(limitMilli int64) (int, error) {
	if limitMilli < 1 || limitMilli > 1000 {
		return 0, fmt.Errorf("compute limit: must be in [1, 1000] thousandths, got %d", limitMilli)
	}
	return int((limitMilli + 9) / 10), nil
}

// ClientEnv returns the environment a client with share s needs to run
// under the MPS daemon whose pipe folder is pipeDir, as the client sees
// that folder (a container needs it mounted):
//
//   - CUDA_MPS_PIPE_DIRECTORY: pipeDir;
//   - CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: ThreadPercentage of the share's
//     compute limit (MPS caps; it cannot reserve, see the package doc);
//   - CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: "0=<memory limit>M", the client's
//     only device (ordinal 0) capped at its memory limit in MiB.
func ClientEnv(pipeDir string, s binding.Share) (map[string]string, error) {
	if pipeDir == "" {
		return nil, fmt.Errorf("mps client env: pipe dir: must be set")
	}
	pct, err := ThreadPercentage(s.ComputeLimitMilli)
	if err != nil {
		return nil, fmt.Errorf("mps client env for GPU %s: %w", s.UUID, err)
	}
	if s.MemoryLimitMiB < 1 {
		return nil, fmt.Errorf("mps client env for GPU %s: memory limit: must be at least 1 MiB, got %d", s.UUID, s.MemoryLimitMiB)
	}
	return map[string]string{
		EnvPipeDir:          pipeDir,
		EnvThreadPercentage: fmt.Sprint(pct),
		EnvPinnedMemLimit:   fmt.Sprintf("0=%dM", s.MemoryLimitMiB),
	}, nil
}
