package thrash

import (
	"fmt"
	"sort"
	"time"
)

// DefaultQuantum is the exclusive time slice.
const DefaultQuantum = 30 * time.Second

// Config is one GPU's setting.
type Config struct {
	// Capacity is the GPU memory in bytes the working sets must fit in,
	// > 0. It may be set below the card's size (tests, a reserve).
	Capacity uint64
	// Quantum is the longest exclusive slice, [1ms, 1h]; 0 takes DefaultQuantum.
	Quantum time.Duration
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Quantum == 0 {
		c.Quantum = DefaultQuantum
	}
	return c
}

// Validate checks a configuration after defaults.
func (c Config) Validate() error {
	switch {
	case c.Capacity == 0:
		return fmt.Errorf("capacity: must be > 0 bytes, got 0")
	case c.Quantum < time.Millisecond || c.Quantum > time.Hour:
		return fmt.Errorf("quantum: must be in [1ms, 1h], got %v", c.Quantum)
	}
	return nil
}

// Client is one client of the GPU as of now.
type Client struct {
	Key string
	// WorkingSet is the bytes it holds on the GPU.
	WorkingSet uint64
	// Active is set when it launched or waited during the last period.
	Active bool
}

// State is the GPU's mode.
type State struct {
	Exclusive bool
	// Holder is the client holding the exclusive slice ("" for none).
	Holder string
	// Since is when Holder got the slice.
	Since time.Time
}

// Step returns the GPU's mode for the next period.
func (c Config) Step(s State, now time.Time, clients []Client) State {
	var total uint64
	for _, cl := range clients {
		total += cl.WorkingSet
	}
	if total <= c.Capacity {
		return State{}
	}
	active := make([]string, 0, len(clients))
	for _, cl := range clients {
		if cl.Active {
			active = append(active, cl.Key)
		}
	}
	sort.Strings(active)
	holding := s.Exclusive && s.Holder != "" && contains(active, s.Holder)
	if holding && now.Sub(s.Since) < c.Quantum {
		return s // the holder keeps its slice
	}
	// The slice is over, the holder went idle, or nobody held: the next
	// active client takes over (the holder itself when it is alone).
	next := successor(active, s.Holder)
	if next == "" {
		return State{Exclusive: true} // nobody active: nobody holds
	}
	return State{Exclusive: true, Holder: next, Since: now}
}

// Runs reports whether key may launch on the GPU in state s.
func (s State) Runs(key string) bool { return !s.Exclusive || s.Holder == key }

// successor is the first key after prev in sorted keys, wrapping; the
// first key when prev is "" or absent and sorts last.
func successor(keys []string, prev string) string {
	if len(keys) == 0 {
		return ""
	}
	i := sort.SearchStrings(keys, prev)
	if i < len(keys) && keys[i] == prev {
		i++
	}
	return keys[i%len(keys)]
}

func contains(keys []string, k string) bool {
	i := sort.SearchStrings(keys, k)
	return i < len(keys) && keys[i] == k
}
