package arbiter

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/tessera-gpu/tessera/arbiter/demand"
	"github.com/tessera-gpu/tessera/arbiter/grant"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/arbiter/rate"
	"github.com/tessera-gpu/tessera/arbiter/thrash"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
)

// Arbiter arbitrates one node's GPUs. Its methods are safe for concurrent
// use; Run and Step serialise with Register and Unregister.
type Arbiter struct {
	cfg     Config
	mps     *mps.Supervisor // ModeMPS only
	mu      sync.Mutex
	clients map[string]*client
	gpus    map[string]*gpu
}

type client struct {
	Client
	region *grant.Region
	seats  []*seat // by device ordinal
}

// seat is one client on one GPU: grant record dev of its region.
type seat struct {
	c     *client
	dev   int
	share binding.Share
	rate  rate.State
	// window sums launches and measured busy time for the next rate
	// update; busyReadings counts its readings that found the client busy.
	window       rate.Observation
	busyReadings int
	idle         demand.State
	// granted is every token ever added minus every token revoked, so
	// granted - balance is the tokens consumed so far.
	granted  int64
	consumed int64
	waits    uint64
	ungated  uint64
	// Last step's outcome, for Snapshot.
	verdict demand.Verdict
	got     int64
	// use folds the Meter's readings into use windows and the idle rule.
	use gpuuse.Tracker
	// lends is set while the seat, an idle holder, lends its guarantee
	// (Config.KeepIdleGuarantee), as of the last step.
	lends bool
}

type gpu struct {
	uuid  string
	seats []*seat // sorted by client key
	mode  thrash.State
}

// New returns an arbiter; it validates cfg after defaults.
func New(cfg Config) (*Arbiter, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("arbiter config: %w", err)
	}
	a := &Arbiter{cfg: cfg, clients: map[string]*client{}, gpus: map[string]*gpu{}}
	if cfg.Mode == ModeMPS {
		sup, err := mps.New(cfg.MPS)
		if err != nil {
			return nil, fmt.Errorf("arbiter config: %w", err)
		}
		a.mps = sup
	}
	return a, nil
}

// Mode returns the arbiter's enforcement mode.
func (a *Arbiter) Mode() Mode { return a.cfg.Mode }

// Register admits a client and publishes its grant region at Dir/grant
// with a guarantee-sized balance per device, so that it can launch at once.
// Guarantees on each GPU must stay within 1000 (admission is the
// scheduler's job; this is a check).
func (a *Arbiter) Register(ctx context.Context, c Client) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if err := a.checkMPS(c); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.clients[c.Key]; ok {
		return fmt.Errorf("register: key: %s is already registered", c.Key)
	}
	for i, g := range c.GPUs {
		sum := g.ComputeMilli
		if cur := a.gpus[g.UUID]; cur != nil {
			for _, s := range cur.seats {
				sum += s.share.ComputeMilli
			}
		}
		if sum > 1000 {
			return fmt.Errorf("register %s: gpus[%d].compute: guarantees on GPU %s would sum to %d, must be at most 1000",
				c.Key, i, g.UUID, sum)
		}
	}
	now, err := a.cfg.Mono()
	if err != nil {
		return fmt.Errorf("register %s: %w", c.Key, err)
	}
	cl := &client{Client: c}
	tokens := make([]int64, len(c.GPUs))
	for i, g := range c.GPUs {
		s := &seat{c: cl, dev: i, share: g, rate: a.cfg.Rate.New(), idle: demand.New(a.cfg.Clock.Now(), g.ComputeMilli)}
		tokens[i] = a.cushionTokens(s, g.ComputeMilli)
		if a.cfg.Mode == ModeMPS {
			tokens[i] = ungated
		}
		s.granted = tokens[i]
		cl.seats = append(cl.seats, s)
	}
	region, err := grant.Create(filepath.Join(c.Dir, RegionFile), grant.Options{
		Devices: len(c.GPUs), StaleAfter: a.cfg.StaleAfter, Epoch: a.cfg.Epoch, Tokens: tokens, Heartbeat: now,
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", c.Key, err)
	}
	cl.region = region
	a.clients[c.Key] = cl
	for _, s := range cl.seats {
		g := a.gpus[s.share.UUID]
		if g == nil {
			g = &gpu{uuid: s.share.UUID}
			a.gpus[g.uuid] = g
		}
		g.seats = append(g.seats, s)
		sort.Slice(g.seats, func(i, j int) bool { return g.seats[i].c.Key < g.seats[j].c.Key })
	}
	a.cfg.Logger.InfoContext(ctx, "arbiter: registered", "key", c.Key, "gpus", len(c.GPUs), "region", region.Path())
	return nil
}

// ErrNotRegistered is returned (wrapped) by Unregister for an unknown key.
var ErrNotRegistered = errors.New("not registered")

// Unregister forgets a client and stops heartbeating its region, which the
// library then treats as stale (its failure policy applies). The file
// stays; removing the run folder is the caller's job.
func (a *Arbiter) Unregister(ctx context.Context, key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cl, ok := a.clients[key]
	if !ok {
		return fmt.Errorf("unregister: key: %s: %w", key, ErrNotRegistered)
	}
	delete(a.clients, key)
	for _, s := range cl.seats {
		g := a.gpus[s.share.UUID]
		for i, o := range g.seats {
			if o == s {
				g.seats = append(g.seats[:i], g.seats[i+1:]...)
				break
			}
		}
		if len(g.seats) == 0 {
			delete(a.gpus, g.uuid)
		}
	}
	a.cfg.Logger.InfoContext(ctx, "arbiter: unregistered", "key", key)
	if err := cl.region.Close(); err != nil {
		return fmt.Errorf("unregister %s: %w", key, err)
	}
	return nil
}

// Run steps every Period until ctx ends, then returns nil. A failed step
// is logged and the loop goes on: libraries fall back to their failure
// policy only if heartbeats stop. In ModeMPS it also runs the MPS control
// daemons, and returns once they have been told to quit.
func (a *Arbiter) Run(ctx context.Context) error {
	if a.mps != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := a.mps.Run(ctx); err != nil {
				a.cfg.Logger.ErrorContext(ctx, "arbiter: MPS daemons stopped", "err", err)
			}
		}()
		defer func() { <-done }()
	}
	for {
		if err := a.Step(ctx); err != nil {
			a.cfg.Logger.WarnContext(ctx, "arbiter: step failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.cfg.Clock.After(a.cfg.Period):
		}
	}
}

// Close unregisters every client.
func (a *Arbiter) Close(ctx context.Context) error {
	a.mu.Lock()
	keys := make([]string, 0, len(a.clients))
	for k := range a.clients {
		keys = append(keys, k)
	}
	a.mu.Unlock()
	var errs []error
	for _, k := range keys {
		errs = append(errs, a.Unregister(ctx, k))
	}
	return errors.Join(errs...)
}
