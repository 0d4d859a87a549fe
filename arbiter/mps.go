package arbiter

import (
	"context"
	"fmt"

	"github.com/tessera-gpu/tessera/arbiter/mps"
)

// ungated is the balance of every record in ModeMPS: "Ungate" in
// docs/enforcement.md (2^62, which no client exhausts).
const ungated int64 = 1 << 62

// checkMPS applies ModeMPS's rules to a client: one GPU (a client reaches
// one control daemon through CUDA_MPS_PIPE_DIRECTORY), and one the
// daemons are configured for.
func (a *Arbiter) checkMPS(c Client) error {
	if a.mps == nil {
		return nil
	}
	if len(c.GPUs) != 1 {
		return fmt.Errorf("client %s: gpus: MPS mode serves clients of one GPU (CUDA_MPS_PIPE_DIRECTORY names one GPU's daemon), got %d",
			c.Key, len(c.GPUs))
	}
	if u := c.GPUs[0].UUID; !a.mps.Has(u) {
		return fmt.Errorf("client %s: gpus[0].uuid: no MPS daemon is configured for GPU %s", c.Key, u)
	}
	return nil
}

// stepMPS keeps every region of one GPU ungated (the heartbeat is done by
// Step) and records each client's share as its MPS cap.
func (a *Arbiter) stepMPS(g *gpu) {
	for _, s := range g.seats {
		if bal := s.c.region.Read(s.dev).Tokens; bal < ungated/2 {
			s.c.region.Add(s.dev, ungated-bal)
		}
		s.got = s.share.ComputeLimitMilli
	}
}

// ClientEnv returns the environment variables, beyond the usual ones
// (docs/handoff.md), that the container or job registered under key must
// be started with: in ModeMPS, mps.ClientEnv for its GPU's daemon, with
// the pipe folder as a host path (a container needs it mounted at the same
// path, and the MPS server's shared memory, i.e. host IPC); in ModeTokens,
// none. An unknown key is ErrNotRegistered.
func (a *Arbiter) ClientEnv(ctx context.Context, key string) (map[string]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("client env: %w", err)
	}
	a.mu.Lock()
	cl, ok := a.clients[key]
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("client env: key: %s: %w", key, ErrNotRegistered)
	}
	if a.mps == nil {
		return map[string]string{}, nil
	}
	g := cl.GPUs[0]
	env, err := mps.ClientEnv(a.mps.PipeDir(g.UUID), g)
	if err != nil {
		return nil, fmt.Errorf("client env of %s: %w", key, err)
	}
	return env, nil
}

// MPS returns the MPS daemons' supervisor in ModeMPS (for their pipe and
// log folders, and Control), nil in ModeTokens.
func (a *Arbiter) MPS() *mps.Supervisor { return a.mps }
