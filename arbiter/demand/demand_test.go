package demand

import (
	"strings"
	"testing"
	"time"
)

func TestStep(t *testing.T) {
	c := Config{IdleAfter: 10 * time.Second}.WithDefaults()
	t0 := time.Unix(1000, 0)
	last := State{LastActive: t0, LastShare: 600}
	const g = 200
	cases := []struct {
		name  string
		now   time.Time
		smp   Sample
		want  Verdict
		moved bool // LastActive becomes now
	}{
		{"waiting is busy", t0.Add(time.Second), Sample{Waited: true, TokensPerMilli: 1}, Verdict{Active, 1000, 0}, true},
		{"running out is busy", t0.Add(time.Second), Sample{Launches: 5, RanOut: true, TokensPerMilli: 1}, Verdict{Active, 1000, 0}, true},
		{"partial use demands it plus headroom", t0.Add(time.Second), Sample{Launches: 400, TokensPerMilli: 2}, Verdict{Active, 251, 0}, true},
		{"partial use is capped at the whole GPU", t0.Add(time.Second), Sample{Launches: 4000, TokensPerMilli: 2}, Verdict{Active, 1000, 0}, true},
		{"briefly idle keeps its burst cushion", t0.Add(9 * time.Second), Sample{TokensPerMilli: 1}, Verdict{Idle, 0, 600}, false},
		{"long idle keeps only its guarantee", t0.Add(10 * time.Second), Sample{TokensPerMilli: 1}, Verdict{Reclaimed, 0, g}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, s := c.Step(last, tc.now, tc.smp, g)
			if got != tc.want {
				t.Fatalf("verdict %+v, want %+v", got, tc.want)
			}
			if moved := s.LastActive.Equal(tc.now); moved != tc.moved {
				t.Fatalf("lastActive moved = %v, want %v", moved, tc.moved)
			}
		})
	}
}

// TestIdleReclaimTimeline walks one client through activity, a short gap
// (burst kept), a long gap (burst withdrawn, guarantee kept) and waking up.
func TestIdleReclaimTimeline(t *testing.T) {
	c := Config{IdleAfter: 3 * time.Second}.WithDefaults()
	t0 := time.Unix(0, 0)
	const g = 100
	s := New(t0, g)
	type step struct {
		at          int // seconds
		smp         Sample
		share       int64 // what the allocator gives it
		wantPhase   Phase
		wantCushion int64
	}
	busy := Sample{Waited: true, TokensPerMilli: 1}
	idle := Sample{TokensPerMilli: 1}
	steps := []step{
		{0, idle, 0, Idle, g},
		{1, busy, 700, Active, 0},
		{2, busy, 650, Active, 0},
		{3, idle, 0, Idle, 650},
		{4, idle, 0, Idle, 650},
		{5, idle, 0, Reclaimed, g},
		{60, idle, 0, Reclaimed, g},
		{61, busy, 300, Active, 0},
		{62, idle, 0, Idle, 300},
	}
	for _, st := range steps {
		v, next := c.Step(s, t0.Add(time.Duration(st.at)*time.Second), st.smp, g)
		if v.Phase != st.wantPhase || v.Cushion != st.wantCushion {
			t.Fatalf("t=%ds: %+v, want phase %v cushion %d", st.at, v, st.wantPhase, st.wantCushion)
		}
		s = Granted(next, v, st.share)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		c    Config
		want string
	}{
		{Config{IdleAfter: -time.Second}, "idleAfter: must be in [0, 24h], got -1s"},
		{Config{Headroom: 0.5}, "headroom: must be in [1, 4], got 0.5"},
	}
	for _, tc := range cases {
		if err := tc.c.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("err = %v, want %q", err, tc.want)
		}
	}
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
}
