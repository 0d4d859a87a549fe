package usepub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

// Sink writes a node's records to the cluster.
type Sink interface {
	Publish(ctx context.Context, st nodeuse.Status) error
}

// DefaultCheck is how often Run asks the pacer: a tenth of the shortest
// period, so a publication is at most a second late.
const DefaultCheck = time.Second

// Loop publishes a node's records when its Pacer says they are due.
type Loop struct {
	// Records builds the node's records at a time.
	Records func(now time.Time) nodeuse.Status
	Sink    Sink
	Pacer   gpuuse.Pacer
	// Clock is the clock Run ticks on (the real one when nil); Check how
	// often it asks the pacer (DefaultCheck when zero).
	Clock clock.WithTicker
	Check time.Duration
	Log   *slog.Logger
}

// Step builds the records at now and publishes them if they are due. It
// returns why it published ("" when it did not) and the Sink's error.
func (l *Loop) Step(ctx context.Context, now time.Time) (gpuuse.Why, error) {
	st := l.Records(now)
	why := l.Pacer.Due(now, st.GPUs)
	if why == "" {
		return "", nil
	}
	if err := l.Sink.Publish(ctx, st); err != nil {
		l.Pacer.Failed(now)
		return why, fmt.Errorf("publish GPU use (%s): %w", why, err)
	}
	l.Pacer.Sent(now, st.GPUs)
	return why, nil
}

// Run steps every Check until ctx ends; a failed publication is logged
// (a repeated failure once) and tried again a pacer's gap later.
func (l *Loop) Run(ctx context.Context) error {
	clk, check := l.Clock, l.Check
	if clk == nil {
		clk = clock.RealClock{}
	}
	if check == 0 {
		check = DefaultCheck
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := clk.NewTicker(check)
	defer t.Stop()
	failing := "" // the last failure's words: a lasting one (a CRD not installed) is warned about once
	for {
		why, err := l.Step(ctx, clk.Now())
		switch {
		case err != nil && ctx.Err() == nil && errors.Unwrap(err).Error() != failing: // the sink's words, whatever the reason to publish
			failing = errors.Unwrap(err).Error()
			log.Warn("GPU use not published; trying again every gap until it is", "err", err, "gap", l.gap())
		case err != nil:
			log.Debug("GPU use still not published", "err", err)
		case why != "" && failing != "":
			failing = ""
			log.Info("GPU use published again")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

func (l *Loop) gap() time.Duration {
	if l.Pacer.Gap > 0 {
		return l.Pacer.Gap
	}
	return gpuuse.DefaultPublishGap
}
