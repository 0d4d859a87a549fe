package simulated

import (
	"strings"
	"testing"
	"time"
)

func TestParseLoad(t *testing.T) {
	for in, want := range map[string]Load{
		"":                               {},
		"0.6":                            {BusyMilli: 600},
		"busy=25%, memory=20Gi":          {BusyMilli: 250, MemoryMiB: 20 << 10},
		"busy=0.9,on=2m,off=8m":          {BusyMilli: 900, On: 2 * time.Minute, Off: 8 * time.Minute},
		"memory=512Mi":                   {MemoryMiB: 512},
		"busy=1,on=1s,off=1s,memory=1Gi": {BusyMilli: 1000, On: time.Second, Off: time.Second, MemoryMiB: 1024},
	} {
		got, err := ParseLoad(in)
		if err != nil || got != want {
			t.Errorf("ParseLoad(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"busy=1.5":        "must be in [0, 1]",
		"on=1m":           "on and off go together",
		"busy=0.5,busy=1": "busy given twice",
		"load=3":          `unknown key "load"`,
		"on=10ms,off=1m":  "at least 1s",
		"memory=lots":     "memory",
	} {
		_, err := ParseLoad(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), LoadEnv) {
			t.Errorf("ParseLoad(%q) error %v, want one naming %s and saying %q", in, err, LoadEnv, want)
		}
	}
}

func TestLoadBusy(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	constant := Load{BusyMilli: 600}
	if got := constant.Busy(start, at(-5*time.Second), at(10*time.Second)); got != 6*time.Second {
		t.Errorf("constant 0.6 over 10 s after the start (and 5 s before it) = %v, want 6s", got)
	}
	cycle := Load{BusyMilli: 1000, On: 2 * time.Minute, Off: 8 * time.Minute}
	for _, c := range []struct {
		from, to time.Duration
		want     time.Duration
	}{
		{0, time.Minute, time.Minute},
		{time.Minute, 3 * time.Minute, time.Minute},
		{3 * time.Minute, 10 * time.Minute, 0},
		{9 * time.Minute, 11 * time.Minute, time.Minute},
		{0, 30 * time.Minute, 6 * time.Minute},
	} {
		if got := cycle.Busy(start, at(c.from), at(c.to)); got != c.want {
			t.Errorf("on 2m/off 8m over [%v, %v] = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
