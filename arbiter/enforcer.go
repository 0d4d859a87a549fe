package arbiter

import (
	"context"
	"errors"

	"github.com/tessera-gpu/tessera/binding"
)

// Enforcer adapts an Arbiter to callers that hand over an allocation as a
// key, a run folder and shares (the node agent, the host daemon).
// Registering a key again replaces the earlier registration, so retries and
// restarts are idempotent.
type Enforcer struct {
	Arbiter *Arbiter
}

// Register admits (or re-admits) a container's shares.
func (e Enforcer) Register(ctx context.Context, key, dir string, gpus []binding.Share) error {
	if err := e.Arbiter.Unregister(ctx, key); err != nil && !errors.Is(err, ErrNotRegistered) {
		return err
	}
	return e.Arbiter.Register(ctx, Client{Key: key, Dir: dir, GPUs: gpus})
}

// Unregister releases a container's shares; an unknown key is not an error.
func (e Enforcer) Unregister(ctx context.Context, key string) error {
	if err := e.Arbiter.Unregister(ctx, key); err != nil && !errors.Is(err, ErrNotRegistered) {
		return err
	}
	return nil
}
