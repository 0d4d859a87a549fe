package rate

import (
	"strings"
	"testing"
	"time"
)

func TestTokensCarryFractions(t *testing.T) {
	c := Config{Period: 10 * time.Millisecond}.WithDefaults()
	s := State{Rate: 1500} // 1500 × 100/1000 × 0.01 = 1.5 tokens a period
	var got []int64
	for range 4 {
		var n int64
		n, s = c.Tokens(s, 100)
		got = append(got, n)
	}
	if want := []int64{1, 2, 1, 2}; !equal(got, want) {
		t.Fatalf("tokens %v, want %v", got, want)
	}
	if n, s2 := c.Tokens(s, 0); n != 0 || s2.Carry != 0 {
		t.Fatalf("zero share granted %d (carry %g)", n, s2.Carry)
	}
}

func TestUpdate(t *testing.T) {
	half := Config{Period: 100 * time.Millisecond, Gain: 0.5, MaxStep: 4}.WithDefaults()
	full := Config{Period: 100 * time.Millisecond, Gain: 1, MaxStep: 4, MinRate: 15}.WithDefaults()
	noMinBusy := half
	noMinBusy.MinBusy = 0
	measured := func(r float64) State { return State{Rate: r, Measured: true} }
	ms := time.Millisecond
	cases := []struct {
		name string
		c    Config
		s    State
		obs  Observation
		want float64
	}{
		{"nothing measured keeps the rate", half, measured(20000), Observation{Launches: 10, Busy: 50 * ms}, 20000},
		{"no launches keeps the rate", half, measured(20000), Observation{Busy: 500 * ms, Span: time.Second}, 20000},
		{"busy below MinBusy of the span keeps the rate", half, measured(20000), Observation{Launches: 3, Busy: 9 * ms, Span: time.Second}, 20000},
		{"no busy time keeps the rate", noMinBusy, measured(20000), Observation{Launches: 3, Span: time.Second}, 20000},
		{"estimate equal to the rate", half, measured(2000), Observation{Launches: 1000, Busy: 500 * ms, Span: time.Second}, 2000},
		{"halfway up", half, measured(1000), Observation{Launches: 1500, Busy: 500 * ms, Span: time.Second}, 2000},
		{"the span does not enter the estimate", half, measured(1000), Observation{Launches: 1500, Busy: 500 * ms, Span: 5 * time.Second}, 2000},
		{"gain 1 jumps to the estimate", full, measured(1000), Observation{Launches: 1500, Busy: 500 * ms, Span: time.Second}, 3000},
		{"bounded by MaxStep", full, measured(20000), Observation{Launches: 200, Busy: time.Second, Span: time.Second}, 5000},
		{"bounded by MinRate", full, measured(20), Observation{Launches: 1, Busy: time.Second, Span: time.Second}, 15},
		{"the first estimate replaces the static rate", half, half.New(), Observation{Launches: 200, Busy: 200 * ms, Span: time.Second}, 1000},
		{"the first estimate within MaxRate", half, half.New(), Observation{Launches: 1 << 40, Busy: 200 * ms, Span: time.Second}, DefaultMaxRate},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.c.Update(tc.s, tc.obs)
			if got.Rate != tc.want {
				t.Fatalf("rate %g, want %g", got.Rate, tc.want)
			}
			if moved := got.Rate != tc.s.Rate; got.Measured != (tc.s.Measured || moved) {
				t.Fatalf("measured %v after %+v", got.Measured, tc.s)
			}
		})
	}
}

func TestBucket(t *testing.T) {
	cases := []struct {
		name                    string
		balance, grant, ceiling int64
		want                    Refill
	}{
		{"empty bucket gets the grant", 0, 10, 20, Refill{Add: 10}},
		{"grant stops at the ceiling", 15, 10, 20, Refill{Add: 5}},
		{"full bucket gets nothing", 20, 10, 20, Refill{}},
		{"above the ceiling is revoked", 30, 10, 20, Refill{Ceiling: 20, Lower: true}},
		{"debt is paid first", -5, 10, 20, Refill{Add: 10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Bucket(tc.balance, tc.grant, tc.ceiling); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		c    Config
		want string
	}{
		{"no period", Config{}, "period: must be in (0, 10s]"},
		{"static below min", Config{Period: time.Second, StaticRate: 1, MinRate: 5}, "staticRate: must be in [5, "},
		{"gain above one", Config{Period: time.Second, Gain: 2}, "gain: must be in (0, 1], got 2"},
		{"step below one", Config{Period: time.Second, MaxStep: 0.5}, "maxStep: must be >= 1, got 0.5"},
		{"min busy of one", Config{Period: time.Second, MinBusy: 1}, "minBusy: must be in [0, 1), got 1"},
		{"min above max", Config{Period: time.Second, MinRate: 10, MaxRate: 5, StaticRate: 7}, "minRate, maxRate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.WithDefaults().Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
