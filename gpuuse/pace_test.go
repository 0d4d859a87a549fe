package gpuuse

import (
	"strings"
	"testing"
	"time"
)

// node is one GPU with one share "ns/a" using busy (nil: no window yet),
// idle when idle is set.
func node(busy *int64, idle bool) []GPU {
	s := Share{Workload: "ns/a", GPU: "GPU-0", Booked: Booked{GuaranteedMilli: 500, LimitMilli: 1000}, Use: Use{Source: Simulated, BusyMilli: busy}}
	if idle {
		s.Idle = &Idle{Since: t0}
	}
	return []GPU{{GPU: "GPU-0", Shares: []Share{s}}}
}

func milli(v int64) *int64 { return &v }

func TestPacerDue(t *testing.T) {
	base := node(milli(400), false)
	other := []GPU{{GPU: "GPU-0", Shares: append(append([]Share(nil), base[0].Shares...), Share{Workload: "ns/b", GPU: "GPU-0"})}}
	rebooked := node(milli(400), false)
	rebooked[0].Shares[0].Booked.LimitMilli = 600
	measured := node(milli(400), false)
	measured[0].Shares[0].Use.Source = Measured
	p := Pacer{Period: 15 * time.Second, Gap: 5 * time.Second, BusyStepMilli: 200}
	for _, c := range []struct {
		name  string
		after time.Duration // since the last publication of base
		gpus  []GPU
		want  Why
	}{
		{"unchanged within the period", 14 * time.Second, node(milli(400), false), ""},
		{"unchanged at the period", 15 * time.Second, node(milli(400), false), WhyPeriod},
		{"small move", 6 * time.Second, node(milli(599), false), ""},
		{"move of the step up", 6 * time.Second, node(milli(600), false), WhyChange},
		{"move of the step down", 6 * time.Second, node(milli(200), false), WhyChange},
		{"large move within the gap", 4 * time.Second, node(milli(1000), false), ""},
		{"idle mark set", 5 * time.Second, node(milli(400), true), WhyChange},
		{"window lost", 5 * time.Second, node(nil, false), WhyChange},
		{"share added", 5 * time.Second, other, WhyChange},
		{"share gone", 5 * time.Second, []GPU{{GPU: "GPU-0"}}, WhyChange},
		{"booking changed", 5 * time.Second, rebooked, WhyChange},
		{"source changed", 5 * time.Second, measured, WhyChange},
		{"clock set back", -time.Second, node(milli(400), false), WhyPeriod},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := p
			q.Sent(t0, base)
			if got := q.Due(t0.Add(c.after), c.gpus); got != c.want {
				t.Errorf("Due %v after = %q, want %q", c.after, got, c.want)
			}
		})
	}
}

func TestPacerFirstAndRetry(t *testing.T) {
	var p Pacer // defaults: 30 s, 5 s, 200 milli
	gpus := node(milli(100), false)
	if got := p.Due(t0, gpus); got != WhyFirst {
		t.Fatalf("first Due = %q, want %q", got, WhyFirst)
	}
	p.Failed(t0)
	for _, c := range []struct {
		after time.Duration
		want  Why
	}{{0, ""}, {DefaultPublishGap - time.Nanosecond, ""}, {DefaultPublishGap, WhyRetry}} {
		if got := p.Due(t0.Add(c.after), gpus); got != c.want {
			t.Errorf("Due %v after a failure = %q, want %q", c.after, got, c.want)
		}
	}
	p.Sent(t0.Add(DefaultPublishGap), gpus)
	if got := p.Due(t0.Add(DefaultPublishGap+DefaultPublishPeriod-time.Nanosecond), gpus); got != "" {
		t.Errorf("Due within the period after a retry = %q, want none", got)
	}
}

// A node whose use swings by a whole GPU every second publishes at most
// once per gap; a quiet one once per period.
func TestPacerBound(t *testing.T) {
	for _, c := range []struct {
		name  string
		swing bool
		want  int
	}{{"swinging", true, int(time.Minute / DefaultPublishGap)}, {"quiet", false, int(time.Minute / DefaultPublishPeriod)}} {
		t.Run(c.name, func(t *testing.T) {
			var p Pacer
			n := 0
			for s := range 60 {
				now := t0.Add(time.Duration(s) * time.Second)
				busy := int64(0)
				if c.swing && s%2 == 1 {
					busy = 1000
				}
				gpus := node(milli(busy), false)
				if p.Due(now, gpus) != "" {
					p.Sent(now, gpus)
					n++
				}
			}
			if n != c.want {
				t.Errorf("%d publications in 60 s, want %d", n, c.want)
			}
		})
	}
}

func TestValidatePublishPeriod(t *testing.T) {
	for _, c := range []struct {
		d  time.Duration
		ok bool
	}{{10 * time.Second, true}, {30 * time.Second, true}, {9 * time.Second, false}, {31 * time.Second, false}} {
		err := ValidatePublishPeriod("--use-period", c.d)
		if (err == nil) != c.ok {
			t.Errorf("%v: err = %v, want ok %v", c.d, err, c.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "--use-period") || !strings.Contains(err.Error(), "[10s, 30s]") || !strings.Contains(err.Error(), c.d.String())) {
			t.Errorf("%v: error %q does not name the flag, the range and the value", c.d, err)
		}
	}
}
