package arbiter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/tessera-gpu/tessera/arbiter/acct"
)

// MemoryUse is the GPU memory one registered container holds on one GPU,
// from the interception library's accounting file.
type MemoryUse struct {
	Key   string
	GPU   string // UUID
	Bytes uint64
}

// Memory reads every registered container's accounting file: the bytes each
// holds on each of its GPUs. A container whose file does not exist yet
// holds nothing.
func (a *Arbiter) Memory(ctx context.Context) ([]MemoryUse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.clients))
	for k := range a.clients {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []MemoryUse
	var errs []error
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("usage: %w", err)
		}
		cl := a.clients[k]
		u, err := acct.Read(acct.Path(cl.Dir, k))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("usage of %s: %w", k, err))
			continue
		}
		for _, s := range cl.seats {
			out = append(out, MemoryUse{Key: k, GPU: s.share.UUID, Bytes: u.Bytes[s.dev]})
		}
	}
	return out, errors.Join(errs...)
}
