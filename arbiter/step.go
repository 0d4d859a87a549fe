package arbiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/acct"
	"github.com/tessera-gpu/tessera/arbiter/demand"
	"github.com/tessera-gpu/tessera/arbiter/rate"
	"github.com/tessera-gpu/tessera/arbiter/share"
	"github.com/tessera-gpu/tessera/arbiter/thrash"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/request"
)

// Step runs one period: heartbeats, observation, allocation and refill on
// every GPU (in ModeMPS: heartbeats, and regions kept ungated). Problems with one GPU (a meter error, an unreadable
// accounting file) are logged and that input is left out; the error
// returned joins what could not be done at all.
func (a *Arbiter) Step(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	mono, err := a.cfg.Mono()
	if err != nil {
		return fmt.Errorf("arbiter step: %w", err)
	}
	for _, cl := range a.clients {
		cl.region.Beat(mono)
	}
	if a.mps != nil {
		for _, g := range a.gpus {
			a.stepMPS(g)
		}
		return nil
	}
	now := a.cfg.Clock.Now()
	usage := a.workingSets(ctx)
	uuids := make([]string, 0, len(a.gpus))
	for u := range a.gpus {
		uuids = append(uuids, u)
	}
	sort.Strings(uuids)
	var errs []error
	for _, u := range uuids {
		if err := a.stepGPU(ctx, a.gpus[u], now, usage); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// workingSets reads every client's accounting file once per step, when
// some GPU has a memory capacity to watch.
func (a *Arbiter) workingSets(ctx context.Context) map[string]acct.Usage {
	out := map[string]acct.Usage{}
	if len(a.cfg.Capacity) == 0 {
		return out
	}
	for key, cl := range a.clients {
		u, err := acct.Read(acct.Path(cl.Dir, key))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			a.cfg.Logger.WarnContext(ctx, "arbiter: cannot read accounting file", "key", key, "err", err)
		}
		out[key] = u
	}
	return out
}

func (a *Arbiter) stepGPU(ctx context.Context, g *gpu, now time.Time, usage map[string]acct.Usage) error {
	reading, metered := a.measure(ctx, g)
	verdicts := make([]demand.Verdict, len(g.seats))
	guarantees := make([]int64, len(g.seats))
	tc := make([]thrash.Client, len(g.seats))
	for i, s := range g.seats {
		c := s.c.region.Read(s.dev)
		total := s.granted - c.Tokens
		launches := max(0, total-s.consumed)
		s.consumed = total
		waited := c.Waiters > 0 || c.Waits > s.waits
		s.waits = c.Waits
		if c.Ungated > s.ungated {
			a.cfg.Logger.WarnContext(ctx, "arbiter: client launched ungated (its region was stale; fail-open)",
				"key", s.c.Key, "gpu", g.uuid, "launches", c.Ungated-s.ungated)
			s.ungated = c.Ungated
		}
		if metered {
			src := gpuuse.Measured
			if reading.Simulated {
				src = gpuuse.Simulated
			}
			s.use.Add(now, reading.Span, reading.Busy[s.c.Key], a.cfg.UseWindow, src, a.cfg.Idle)
			if !reading.Simulated {
				a.feedback(s, launches, reading)
			}
		}
		// After the reading: the step whose window ends the idle mark
		// already gives the guarantee back.
		guarantees[i], s.lends = a.guarantee(s)
		verdicts[i], s.idle = a.cfg.Demand.Step(s.idle, now, demand.Sample{
			Launches: launches, Waited: waited, RanOut: launches > 0 && c.Tokens <= 0,
			TokensPerMilli: s.rate.Rate * a.cfg.Period.Seconds() / 1000,
		}, guarantees[i])
		tc[i] = thrash.Client{Key: s.c.Key, WorkingSet: usage[s.c.Key].Bytes[s.dev], Active: verdicts[i].Phase == demand.Active}
	}
	if capacity := a.cfg.Capacity[g.uuid]; capacity > 0 {
		prev := g.mode
		g.mode = thrash.Config{Capacity: capacity, Quantum: a.cfg.Quantum}.Step(g.mode, now, tc)
		if prev.Exclusive != g.mode.Exclusive || prev.Holder != g.mode.Holder {
			a.cfg.Logger.InfoContext(ctx, "arbiter: GPU mode", "gpu", g.uuid, "exclusive", g.mode.Exclusive, "holder", g.mode.Holder)
		}
	} else {
		g.mode = thrash.State{}
	}
	in := make([]share.Client, len(g.seats))
	for i, s := range g.seats {
		d := verdicts[i].Demand
		switch {
		case !g.mode.Runs(s.c.Key):
			d, verdicts[i].Cushion = 0, 0
		case g.mode.Exclusive:
			d = request.Whole
		}
		verdicts[i].Demand = d
		in[i] = share.Client{Guarantee: guarantees[i], Limit: s.share.ComputeLimitMilli, Demand: d, Lends: s.lends}
	}
	shares, err := share.Allocate(in)
	if err != nil {
		return fmt.Errorf("arbiter step: GPU %s: %w", g.uuid, err)
	}
	for i, s := range g.seats {
		a.refill(s, verdicts[i], shares[i])
		s.idle = demand.Granted(s.idle, verdicts[i], shares[i])
		s.verdict, s.got = verdicts[i], shares[i]
	}
	return nil
}

// guarantee is what the split guarantees seat s: its booked guarantee, or,
// while it is an idle holder and lending is on, only its IdleFloor (lends:
// the rest is lent). The mark counts whatever its readings' source: on a
// simulated GPU the split is as simulated as the use, and lending moves
// shares, never a launch rate.
func (a *Arbiter) guarantee(s *seat) (milli int64, lends bool) {
	g := s.share.ComputeMilli
	if a.cfg.KeepIdleGuarantee || s.use.Idle(a.cfg.Idle) == nil {
		return g, false
	}
	f := IdleFloor(g, a.cfg.Idle)
	return f, f < g
}

// IdleFloor is the share an idle holder with guarantee g keeps while its
// guarantee is lent: twice the idle threshold, at most g. It keeps the
// holder running, and when it wakes its measured use can cross the
// threshold and end the mark even if every neighbour bursts to its limit:
// at the threshold itself a woken holder would be measured about at it,
// and NVML's sampling noise or a rate estimated low could keep it marked,
// and so held to the floor, while it works.
func IdleFloor(g int64, rule gpuuse.IdleRule) int64 {
	return min(g, 2*rule.BelowMilli)
}

// measure reads the Meter for the GPU; metered is false without one. A
// failed reading is logged, and the clients' windows are dropped: later
// readings would not cover the launches counted meanwhile.
func (a *Arbiter) measure(ctx context.Context, g *gpu) (r Reading, metered bool) {
	if a.cfg.Meter == nil {
		return Reading{}, false
	}
	keys := make([]string, len(g.seats))
	for i, s := range g.seats {
		keys[i] = s.c.Key
	}
	r, err := a.cfg.Meter.Read(ctx, g.uuid, keys)
	if err != nil {
		a.cfg.Logger.WarnContext(ctx, "arbiter: no utilisation this period; rates unchanged", "gpu", g.uuid, "err", err)
		for _, s := range g.seats {
			s.window, s.busyReadings = rate.Observation{}, 0
		}
		return Reading{}, false
	}
	return r, true
}

// Window closing: a seat's window closes for a rate update once its
// readings span MeterWindow and at least minBusyReadings of them found the
// client busy, or once they span maxWindows × MeterWindow.
//
// NVML gives each ~200 ms tick wholly to one process, chosen (as far as
// equal processes show) in proportion to their GPU time: a client with a
// third of the GPU is measured busy in a third of the ticks. launches ÷
// busy over a fixed window of n ticks, skipped when the client was never
// picked, is then biased by a factor E[np/k | k > 0] (k the ticks it got):
// 0.45 for a client with a tenth of the GPU (n = 5), 1.2 for one with
// half. The first shrinks the client's tokens and so its share, which
// shrinks it further.
// Waiting for a fixed count of busy ticks instead makes n/k an unbiased
// estimate of 1/p (inverse binomial sampling); with 5 it is within 0.1 %
// for every p (20 000 simulated windows per p), at the price of windows of
// about 5/p ticks for a client with GPU fraction p. docs/enforcement.md
// ("One step", step 3) has the figures.
const (
	minBusyReadings = 5
	maxWindows      = 60
)

// feedback adds a period's launches and the GPU's reading to the seat's
// window and updates the rate when the window closes (see minBusyReadings).
// The estimate is launches ÷ busy seconds over the whole window, a ratio
// of sums: a single reading can say 99% busy for a client that ran a third
// of the tick and nothing for its neighbour, but the sums converge on each
// client's GPU time.
func (a *Arbiter) feedback(s *seat, launches int64, r Reading) {
	w := &s.window
	w.Launches += launches
	if r.Span > 0 {
		b := min(max(r.Busy[s.c.Key], 0), r.Span)
		w.Busy += b
		w.Span += r.Span
		if b > 0 {
			s.busyReadings++
		}
	}
	switch {
	case w.Span < a.cfg.MeterWindow:
		return
	case w.Launches > 0 && s.busyReadings < minBusyReadings && w.Span < maxWindows*a.cfg.MeterWindow:
		return
	}
	s.rate = a.cfg.Rate.Update(s.rate, *w)
	s.window, s.busyReadings = rate.Observation{}, 0
}

// refill grants an active client its share's tokens, bounded by
// BurstPeriods grants, and tops an idle one up to its cushion; tokens
// above the bound are revoked.
func (a *Arbiter) refill(s *seat, v demand.Verdict, got int64) {
	var n, ceiling int64
	if got > 0 {
		n, s.rate = a.cfg.Rate.Tokens(s.rate, got)
		ceiling = n * int64(a.cfg.BurstPeriods)
	}
	if cushion := a.cushionTokens(s, v.Cushion); cushion > ceiling {
		n, ceiling = cushion, cushion
	}
	balance := s.c.region.Read(s.dev).Tokens
	r := rate.Bucket(balance, n, ceiling)
	switch {
	case r.Lower:
		_, revoked := s.c.region.LowerTo(s.dev, r.Ceiling)
		s.granted -= revoked
	case r.Add > 0:
		s.c.region.Add(s.dev, r.Add)
		s.granted += r.Add
	}
}

// cushionTokens is one period of tokens at milli thousandths.
func (a *Arbiter) cushionTokens(s *seat, milli int64) int64 {
	if milli <= 0 {
		return 0
	}
	return int64(math.Ceil(s.rate.Rate * float64(milli) / 1000 * a.cfg.Period.Seconds()))
}
