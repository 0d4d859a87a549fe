package hostd

import (
	"context"
	"log/slog"
	"path/filepath"
	"sort"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// ArbiterSeat adapts the node arbiter to the daemon's Arbiter seam: a job
// is registered under its ID with its run folder and shares (in device
// index order, the job's CUDA ordinals), and its grant region is returned
// for TESSERA_ARBITER_REGION.
type ArbiterSeat struct {
	Enforcer arbiter.Enforcer
	Log      *slog.Logger
}

// Admit implements Arbiter.
func (s ArbiterSeat) Admit(job api.Job, shmDir string) (string, error) {
	gpus := append([]binding.Share(nil), job.Shares...)
	sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	if err := s.Enforcer.Register(context.Background(), job.ID, shmDir, gpus); err != nil {
		return "", err
	}
	return filepath.Join(shmDir, arbiter.RegionFile), nil
}

// Release implements Arbiter.
func (s ArbiterSeat) Release(jobID string) {
	if err := s.Enforcer.Unregister(context.Background(), jobID); err != nil && s.Log != nil {
		s.Log.Warn("releasing a job's GPU shares", "job", jobID, "err", err)
	}
}
