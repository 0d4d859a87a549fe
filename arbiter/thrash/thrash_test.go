package thrash

import (
	"strings"
	"testing"
	"time"
)

const gib = uint64(1) << 30

// TestTimeline drives one GPU with a fake clock through fitting,
// oversubscription, quantum expiry, early release and fitting again.
func TestTimeline(t *testing.T) {
	c := Config{Capacity: 10 * gib, Quantum: 30 * time.Second}.WithDefaults()
	t0 := time.Unix(0, 0)
	cl := func(ws ...uint64) []Client { // a, b, c; all active
		keys := []string{"a", "b", "c"}
		var out []Client
		for i, w := range ws {
			out = append(out, Client{Key: keys[i], WorkingSet: w * gib, Active: true})
		}
		return out
	}
	idle := func(cs []Client, key string) []Client {
		for i := range cs {
			if cs[i].Key == key {
				cs[i].Active = false
			}
		}
		return cs
	}
	steps := []struct {
		name    string
		at      time.Duration
		clients []Client
		want    State
	}{
		{"fits: shared", 0, cl(4, 5), State{}},
		{"exactly fits: shared", time.Second, cl(5, 5), State{}},
		{"oversubscribed: first key holds", 2 * time.Second, cl(6, 5), State{true, "a", t0.Add(2 * time.Second)}},
		{"within the quantum: a keeps it", 31 * time.Second, cl(6, 5), State{true, "a", t0.Add(2 * time.Second)}},
		{"quantum over: b", 32 * time.Second, cl(6, 5), State{true, "b", t0.Add(32 * time.Second)}},
		{"b goes idle: early release to a", 40 * time.Second, idle(cl(6, 5), "b"), State{true, "a", t0.Add(40 * time.Second)}},
		{"a third client joins, waits its turn", 50 * time.Second, cl(6, 5, 1), State{true, "a", t0.Add(40 * time.Second)}},
		{"round robin skips b when idle", 70 * time.Second, idle(cl(6, 5, 1), "b"), State{true, "c", t0.Add(70 * time.Second)}},
		{"wraps to a", 100 * time.Second, cl(6, 5, 1), State{true, "a", t0.Add(100 * time.Second)}},
		{"nobody active: nobody holds", 101 * time.Second, idle(idle(idle(cl(6, 5, 1), "a"), "b"), "c"), State{Exclusive: true}},
		{"c wakes alone: c holds", 102 * time.Second, idle(idle(cl(6, 5, 1), "a"), "b"), State{true, "c", t0.Add(102 * time.Second)}},
		{"alone past the quantum: fresh slice", 133 * time.Second, idle(idle(cl(6, 5, 1), "a"), "b"), State{true, "c", t0.Add(133 * time.Second)}},
		{"working sets shrink: shared again", 134 * time.Second, cl(3, 3, 3), State{}},
	}
	var s State
	for _, st := range steps {
		s = c.Step(s, t0.Add(st.at), st.clients)
		if s != st.want {
			t.Fatalf("%s: state %+v, want %+v", st.name, s, st.want)
		}
	}
}

func TestRuns(t *testing.T) {
	cases := []struct {
		s    State
		key  string
		want bool
	}{
		{State{}, "a", true},
		{State{Exclusive: true, Holder: "a"}, "a", true},
		{State{Exclusive: true, Holder: "a"}, "b", false},
		{State{Exclusive: true}, "a", false},
	}
	for _, tc := range cases {
		if got := tc.s.Runs(tc.key); got != tc.want {
			t.Errorf("%+v.Runs(%q) = %v, want %v", tc.s, tc.key, got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		c    Config
		want string
	}{
		{Config{}, "capacity: must be > 0 bytes"},
		{Config{Capacity: 1, Quantum: time.Microsecond}, "quantum: must be in [1ms, 1h], got 1µs"},
	}
	for _, tc := range cases {
		if err := tc.c.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("err = %v, want %q", err, tc.want)
		}
	}
}
