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
	cases := []struct {
		name string
		c    Config
		rate float64
		obs  Observation
		want float64
	}{
		{"no measurement keeps the rate", half, 20000, Observation{Launches: 10, Busy: 0.5}, 20000},
		{"no launches keeps the rate", half, 20000, Observation{Busy: 0.5, Measured: true}, 20000},
		{"a sample below MinBusy keeps the rate", half, 20000, Observation{Launches: 3, Busy: 0.005, Measured: true}, 20000},
		{"estimate equal to the rate", half, 2000, Observation{Launches: 100, Busy: 0.5, Measured: true}, 2000},
		{"halfway up", half, 1000, Observation{Launches: 150, Busy: 0.5, Measured: true}, 2000},
		{"gain 1 jumps to the estimate", full, 1000, Observation{Launches: 150, Busy: 0.5, Measured: true}, 3000},
		{"bounded by MaxStep", full, 20000, Observation{Launches: 1, Busy: 1, Measured: true}, 5000},
		{"bounded by MinRate", full, 20, Observation{Launches: 1, Busy: 1, Measured: true}, 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.c.Update(State{Rate: tc.rate}, tc.obs).Rate
			if got != tc.want {
				t.Fatalf("rate %g, want %g", got, tc.want)
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
