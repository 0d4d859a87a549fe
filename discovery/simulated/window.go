package simulated

import (
	"sync"
	"time"
)

// Started is a declared load and when its job (or container) started:
// its on/off pattern runs from then.
type Started struct {
	Start time.Time
	Load  Load
}

// Window turns declared loads into the busy time a meter reports: per GPU
// it keeps when the GPU was last read, so that readings cover back-to-back
// spans. The host daemon's and the node agent's simulated meters share it
// (they differ only in where the loads come from). Safe for concurrent use.
type Window struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// Busy returns the span since GPU uuid's previous reading and each key's
// busy time in it, by its load in loads (a key without one ran nothing).
// At the GPU's first reading, or when the clock did not move forward, the
// span is 0 and loads is not called (the reading only starts a span). An
// error from loads is returned, and the span still moves on.
func (w *Window) Busy(uuid string, now time.Time, keys []string, loads func() (map[string]Started, error)) (time.Duration, map[string]time.Duration, error) {
	w.mu.Lock()
	if w.last == nil {
		w.last = map[string]time.Time{}
	}
	prev, ok := w.last[uuid]
	w.last[uuid] = now
	w.mu.Unlock()
	if !ok || !now.After(prev) {
		return 0, nil, nil
	}
	ls, err := loads()
	if err != nil {
		return 0, nil, err
	}
	busy := make(map[string]time.Duration, len(keys))
	for _, k := range keys {
		if l, ok := ls[k]; ok {
			busy[k] = l.Load.Busy(l.Start, prev, now)
		}
	}
	return now.Sub(prev), busy, nil
}
