package dispatch

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/cycle"
)

func TestNewRejectsBadDurations(t *testing.T) {
	for _, cfg := range []Config{
		{InitialBackoff: -time.Second},
		{InitialBackoff: 10 * time.Second, MaxBackoff: 5 * time.Second},
		{ReservationWait: -1},
		{PreemptorWait: -1},
		{AgingStep: -1},
		{MinRuntime: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}

// TestOrder: the binds of a cycle that places everything come in the
// order the core served the workloads.
func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		items []Item
		want  []string
	}{
		{"higher priority first", []Item{
			{ID: "low", Priority: 0, Arrived: t0.Add(-2 * time.Minute)},
			{ID: "high", Priority: 5, Arrived: t0.Add(-time.Minute)},
		}, []string{"high", "low"}},
		{"equal priority by arrival", []Item{
			{ID: "a", Arrived: t0.Add(-time.Minute)},
			{ID: "b", Arrived: t0.Add(-2 * time.Minute)},
		}, []string{"b", "a"}},
		{"equal arrival by sequence", []Item{
			{ID: "a", Arrived: t0, Seq: 2},
			{ID: "b", Arrived: t0, Seq: 1},
		}, []string{"b", "a"}},
		{"equal sequence by ID", []Item{
			{ID: "b", Arrived: t0, Seq: 1},
			{ID: "a", Arrived: t0, Seq: 1},
		}, []string{"a", "b"}},
		{"all together", []Item{
			{ID: "d", Priority: 1, Arrived: t0, Seq: 1},
			{ID: "c", Priority: 1, Arrived: t0, Seq: 1},
			{ID: "b", Priority: 1, Arrived: t0, Seq: 0},
			{ID: "e", Priority: 1, Arrived: t0.Add(-time.Second), Seq: 9},
			{ID: "a", Priority: 2, Arrived: t0.Add(time.Hour)},
			{ID: "z", Priority: 0, Arrived: t0.Add(-time.Hour)},
		}, []string{"a", "e", "b", "c", "d", "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Config{}, gpuNode("a", 8))
			for _, it := range tc.items {
				w.ws[it.ID] = wholeGPUs(it.ID, 1)
				w.core.Add(it)
			}
			if got := binds(w.cycle()); !slices.Equal(got, tc.want) {
				t.Fatalf("served %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAging: an old low-priority workload gains one priority per step it
// has waited, and overtakes a newer high one (priority 3) once it has
// waited three steps (a tie goes to the earlier arrival), not before.
func TestAging(t *testing.T) {
	const step = time.Minute
	for _, tc := range []struct {
		name   string
		aging  time.Duration
		waited time.Duration
		since  time.Duration // the low one began to wait this long after t0
		first  string
	}{
		{"two steps: the high one first", step, 2 * step, 0, "high"},
		{"just short of three steps: the high one first", step, 3*step - time.Second, 0, "high"},
		{"three steps: the old one ties and goes first", step, 3 * step, 0, "low"},
		{"ten steps: the old one first", step, 10 * step, 0, "low"},
		{"no aging: the high one first however long", 0, 10 * step, 0, "high"},
		{"aging counts from Since, not Arrived", step, 10 * step, 8 * step, "high"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Config{AgingStep: tc.aging}, gpuNode("a", 8))
			mods := []func(*Item){}
			if tc.since > 0 {
				mods = append(mods, since(t0.Add(tc.since)))
			}
			w.arrive("low", 1, mods...)
			w.advance(tc.waited)
			w.arrive("high", 1, prio(3))
			if got := binds(w.cycle()); len(got) != 2 || got[0] != tc.first {
				t.Fatalf("served %v, want %s first", got, tc.first)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	cfg := Config{InitialBackoff: 10 * time.Second, MaxBackoff: 40 * time.Second}

	t.Run("doubles on each failure up to the maximum, not tried before", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 1))
		w.arrive("big", 2)
		for i, d := range []time.Duration{10, 20, 40, 40, 40} {
			d *= time.Second
			rd := w.cycle()
			wt := waitOf(t, rd, "big")
			if wt.Status != cycle.NoFit || wt.Cause != CauseCycle || !wt.Retry.Equal(w.now.Add(d)) || !rd.Next.Equal(wt.Retry) || rd.Tried != 1 {
				t.Fatalf("failure %d: %+v, next %v; want no-fit retried after %v", i+1, wt, rd.Next, d)
			}
			w.advance(d - time.Second)
			rd = w.cycle()
			if rd.Tried != 0 || rd.BackingOff != 1 || len(rd.Waits) != 0 || !w.core.BackingOff("big", w.now) {
				t.Fatalf("failure %d: tried one second before the backoff ends: %+v", i+1, rd)
			}
			w.advance(time.Second)
			if w.core.BackingOff("big", w.now) {
				t.Fatalf("failure %d: still backing off when the wait ends", i+1)
			}
		}
	})

	t.Run("a cluster change ends a fit failure's wait, keeping the count", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 1))
		w.arrive("big", 2)
		w.cycle()
		w.advance(time.Second)
		w.core.ClusterChanged()
		if w.core.BackingOff("big", w.now) {
			t.Fatal("still backing off after a cluster change")
		}
		rd := w.cycle()
		if wt := waitOf(t, rd, "big"); rd.Tried != 1 || !wt.Retry.Equal(w.now.Add(20*time.Second)) {
			t.Fatalf("%+v: want tried again and backed off 20s (second failure)", rd)
		}
	})

	t.Run("a cluster change does not end a failed bind's wait", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 1))
		w.arrive("p", 1)
		if got := binds(w.cycle()); !slices.Equal(got, []string{"p"}) {
			t.Fatalf("binds %v", got)
		}
		retry := w.bindFailed("p")
		if !retry.Equal(w.now.Add(10 * time.Second)) {
			t.Fatalf("retry at %v, want +10s", retry.Sub(w.now))
		}
		w.advance(time.Second)
		w.core.ClusterChanged()
		rd := w.cycle()
		if rd.Tried != 0 || rd.BackingOff != 1 || len(rd.Binds) != 0 || !rd.Next.Equal(retry) {
			t.Fatalf("%+v: want p left out until %v", rd, retry)
		}
		w.now = retry
		if got := binds(w.cycle()); !slices.Equal(got, []string{"p"}) {
			t.Fatalf("after its backoff: binds %v", got)
		}
	})

	t.Run("Next is the earliest end", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 1))
		w.arrive("big1", 2)
		w.cycle() // big1 until t0+10s
		w.advance(5 * time.Second)
		w.arrive("big2", 3)
		rd := w.cycle() // big2 until t0+15s
		if rd.Tried != 1 || rd.BackingOff != 1 || !rd.Next.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("%+v: want next at +10s", rd)
		}
		w.core.Remove("big1")
		w.core.Remove("big2")
		if rd := w.cycle(); !rd.Next.IsZero() {
			t.Fatalf("next %v with nothing waiting", rd.Next)
		}
	})

	t.Run("a respecified workload starts its count over", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 1))
		it := w.arrive("big", 2)
		for i := range 3 {
			if i > 0 {
				w.core.ClusterChanged()
			}
			w.cycle()
		}
		w.core.Update(it, false)
		if !w.core.BackingOff("big", w.now) {
			t.Fatal("a description change ended the wait")
		}
		w.core.Update(it, true)
		if w.core.BackingOff("big", w.now) {
			t.Fatal("a respecified workload still backs off")
		}
		if wt := waitOf(t, w.cycle(), "big"); !wt.Retry.Equal(w.now.Add(10 * time.Second)) {
			t.Fatalf("retry after %v, want 10s (a fresh count)", wt.Retry.Sub(w.now))
		}
	})

	t.Run("Remove forgets the backoff", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 1))
		it := w.arrive("big", 2)
		w.cycle()
		w.core.ClusterChanged()
		w.cycle() // second failure: 20s
		w.core.Remove("big")
		if w.core.Len() != 0 || w.core.BackingOff("big", w.now) {
			t.Fatalf("removed workload kept: len %d", w.core.Len())
		}
		w.core.Add(it)
		rd := w.cycle()
		if wt := waitOf(t, rd, "big"); rd.Tried != 1 || !wt.Retry.Equal(w.now.Add(10*time.Second)) {
			t.Fatalf("%+v: want tried at once with a fresh count", rd)
		}
	})
}

func TestBinds(t *testing.T) {
	w := newWorld(t, Config{InitialBackoff: 10 * time.Second, MaxBackoff: time.Minute}, gpuNode("a", 2))
	w.arrive("p", 1)
	rd := w.cycle()
	if len(rd.Binds) != 1 || rd.Binds[0].ID != "p" || len(rd.Binds[0].Decisions) != 1 || rd.Binds[0].Decisions[0].Node != 0 {
		t.Fatalf("binds %+v", rd.Binds)
	}
	if got := freeGPUs(w.last); got[0] != 1000 {
		t.Fatalf("the cycle did not book p on the frame's cluster: free %v", got)
	}
	if !w.core.Binding("p") || w.core.Waiting("p") || w.core.Len() != 1 {
		t.Fatal("p is not binding after its Bind")
	}
	w.advance(time.Second)
	if rd := w.cycle(); rd.Tried != 0 || len(rd.Binds) != 0 || len(rd.Waits) != 0 {
		t.Fatalf("p tried again while binding: %+v", rd)
	}
	retry := w.bindFailed("p")
	if w.core.Binding("p") || !w.core.Waiting("p") || !w.core.BackingOff("p", w.now) || !retry.After(w.now) {
		t.Fatalf("after a failed bind: binding %v waiting %v, retry %v", w.core.Binding("p"), w.core.Waiting("p"), retry)
	}
	if rd := w.cycle(); len(rd.Binds) != 0 || rd.BackingOff != 1 {
		t.Fatalf("p retried before its backoff: %+v", rd)
	}
	w.now = retry
	if got := binds(w.cycle()); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("binds %v after the backoff", got)
	}
	w.core.Bound("p")
	if w.core.Len() != 0 || w.core.Binding("p") || w.core.Waiting("p") {
		t.Fatal("p kept after Bound")
	}
	if rd := w.cycle(); rd.Tried != 0 || len(rd.Binds) != 0 {
		t.Fatalf("bound p tried: %+v", rd)
	}
}

func TestGangs(t *testing.T) {
	cfg := Config{InitialBackoff: 10 * time.Second, MaxBackoff: time.Minute}

	t.Run("waits for members without backoff, then places all together", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 5))
		w.gangs["g"] = GangSpec{Min: 3}
		w.arrive("solo", 1)
		w.arrive("g1", 1, gang("g"))
		w.arrive("g2", 1, gang("g"))
		rd := w.cycle()
		for _, id := range []string{"g1", "g2"} {
			if wt := waitOf(t, rd, id); wt.Status != cycle.GangWaiting || !wt.Retry.IsZero() {
				t.Fatalf("%s: %+v, want gang-waiting with no retry time", id, wt)
			}
		}
		w.advance(time.Second)
		if rd := w.cycle(); rd.BackingOff != 0 || rd.Tried != 1 {
			t.Fatalf("the waiting gang was backed off: %+v", rd)
		}
		w.arrive("x", 1)
		w.arrive("g3", 1, gang("g"))
		rd = w.cycle()
		if got := binds(rd); !slices.Equal(got, []string{"g1", "g2", "g3", "x"}) {
			t.Fatalf("binds %v, want the gang's members together at its first member's place", got)
		}
		for _, b := range rd.Binds[:3] {
			if b.Gang != "g" {
				t.Fatalf("%s: gang %q", b.ID, b.Gang)
			}
		}
	})

	t.Run("all or nothing, backed off, a new member ends the wait", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 1))
		w.gangs["g"] = GangSpec{Min: 2}
		w.arrive("g1", 1, gang("g"))
		w.arrive("g2", 1, gang("g"))
		rd := w.cycle()
		if len(rd.Binds) != 0 {
			t.Fatalf("binds %v: only one member fits", binds(rd))
		}
		if got := freeGPUs(w.last); got[0] != 1000 {
			t.Fatalf("a misfit gang left bookings: free %v", got)
		}
		for _, id := range []string{"g1", "g2"} {
			if wt := waitOf(t, rd, id); wt.Status != cycle.GangMisfit || !wt.Retry.Equal(w.now.Add(10*time.Second)) {
				t.Fatalf("%s: %+v", id, wt)
			}
		}
		w.advance(time.Second)
		if rd := w.cycle(); rd.Tried != 0 || rd.BackingOff != 2 {
			t.Fatalf("%+v: want both members backing off", rd)
		}
		w.arrive("g3", 1, gang("g"))
		if rd := w.cycle(); rd.Tried != 1 || rd.BackingOff != 0 || len(rd.Waits) != 3 {
			t.Fatalf("%+v: a new member should end the gang's wait", rd)
		}
	})

	t.Run("schedule timeout", func(t *testing.T) {
		w := newWorld(t, Config{}, gpuNode("a", 1))
		w.gangs["g"] = GangSpec{Min: 2, Timeout: time.Minute}
		w.arrive("g1", 1, gang("g"))
		w.advance(10 * time.Second)
		w.arrive("g2", 1, gang("g"))
		w.advance(49 * time.Second) // 59s after g1
		if wt := waitOf(t, w.cycle(), "g2"); wt.Status != cycle.GangMisfit || strings.Contains(wt.Message, "timed out") {
			t.Fatalf("before the timeout: %+v", wt)
		}
		w.advance(2 * time.Second)
		rd := w.cycle()
		for _, id := range []string{"g1", "g2"} {
			if wt := waitOf(t, rd, id); wt.Status != cycle.GangMisfit || !strings.Contains(wt.Message, "gang g timed out") {
				t.Fatalf("%s after the timeout: %+v", id, wt)
			}
		}
	})

	t.Run("a definition error refuses every member", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 4))
		bad := errors.New("min member is not a number")
		w.gangs["g"] = GangSpec{Err: bad}
		w.arrive("g1", 1, gang("g"))
		w.arrive("g2", 1, gang("g"))
		rd := w.cycle()
		for _, id := range []string{"g1", "g2"} {
			if wt := waitOf(t, rd, id); wt.Status != cycle.Invalid || wt.Cause != CauseRefused || !errors.Is(wt.Err, bad) {
				t.Fatalf("%s: %+v", id, wt)
			}
		}
		if len(rd.Binds) != 0 {
			t.Fatalf("binds %v", binds(rd))
		}
	})

	t.Run("no gang reader refuses every gang", func(t *testing.T) {
		w := newWorld(t, cfg, gpuNode("a", 4))
		w.noGangs = true
		w.arrive("g1", 1, gang("g"))
		w.arrive("solo", 1)
		rd := w.cycle()
		if wt := waitOf(t, rd, "g1"); wt.Status != cycle.Invalid || wt.Cause != CauseRefused {
			t.Fatalf("g1: %+v", wt)
		}
		if got := binds(rd); !slices.Equal(got, []string{"solo"}) {
			t.Fatalf("binds %v", got)
		}
	})

	t.Run("a member whose bind failed joins the running members", func(t *testing.T) {
		w := newWorld(t, Config{}, gpuNode("a", 2))
		w.gangs["g"] = GangSpec{Min: 2}
		w.arrive("g1", 1, gang("g"))
		w.arrive("g2", 1, gang("g"))
		if got := binds(w.cycle()); !slices.Equal(got, []string{"g1", "g2"}) {
			t.Fatalf("binds %v", got)
		}
		w.core.Bound("g1")
		b := w.held["g1"]
		delete(w.held, "g1")
		w.running = append(w.running, cycle.Running{ID: "g1", Gang: "g", Started: w.now, Parts: b.Workload.Parts, Decisions: b.Decisions})
		w.bindFailed("g2")
		if got := binds(w.cycle()); !slices.Equal(got, []string{"g2"}) {
			t.Fatalf("binds %v: g2 completes the gang with g1 running", got)
		}
	})
}

func TestTranslation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		queue  string
		status cycle.Status
		cause  Cause
	}{
		{"unready waits, backed off", Unready{Reason: "claim not made yet"}, "", cycle.NoFit, CauseUnready},
		{"an error refuses", errors.New("bad volume"), "", cycle.Invalid, CauseRefused},
		{"an unknown queue", nil, "nope", cycle.Invalid, CauseUnknownQueue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Config{InitialBackoff: 10 * time.Second, MaxBackoff: time.Minute}, gpuNode("a", 2))
			w.arrive("p", 1, queue(tc.queue))
			w.arrive("ok", 1)
			w.errs["p"] = tc.err
			rd := w.cycle()
			wt := waitOf(t, rd, "p")
			if wt.Status != tc.status || wt.Cause != tc.cause || !wt.Retry.Equal(w.now.Add(10*time.Second)) {
				t.Fatalf("%+v", wt)
			}
			if tc.err != nil && !errors.Is(wt.Err, tc.err) {
				t.Fatalf("err %v, want %v", wt.Err, tc.err)
			}
			if got := binds(rd); !slices.Equal(got, []string{"ok"}) {
				t.Fatalf("binds %v", got)
			}
			w.advance(time.Second)
			if rd := w.cycle(); rd.BackingOff != 1 || hasWait(rd, "p") {
				t.Fatalf("%+v: p should back off", rd)
			}
		})
	}
}

// TestReservation: node a has one GPU of two free, b none; big asks two
// and waits for a to empty.
func TestReservation(t *testing.T) {
	const wait = 30 * time.Second
	setup := func(t *testing.T, resWait time.Duration) *world {
		w := newWorld(t, Config{ReservationWait: resWait, Noun: "pod"}, gpuNode("a", 2), gpuNode("b", 2))
		w.run("r1", 0, 0, []int{0}, t0.Add(-time.Hour))
		w.run("r2", 0, 1, []int{0, 1}, t0.Add(-time.Hour))
		w.arrive("big", 2)
		return w
	}
	// reserve runs big's cycles until it reserves a.
	reserve := func(t *testing.T, w *world) {
		t.Helper()
		w.cycle()
		w.advance(wait - time.Second)
		w.cycle()
		if what, _ := w.core.Reservation(); what != "" {
			t.Fatalf("reserved %q before the reservation wait", what)
		}
		w.advance(time.Second)
		w.cycle()
		if what, nodes := w.core.Reservation(); what != "a pod waiting longer" || !slices.Equal(nodes, []string{"a"}) {
			t.Fatalf("reservation %q on %v, want a pod waiting longer on [a]", what, nodes)
		}
	}

	t.Run("without a reservation the small one takes a", func(t *testing.T) {
		w := setup(t, 0)
		w.cycle()
		w.advance(time.Hour)
		w.arrive("small", 1)
		if got := binds(w.cycle()); !slices.Equal(got, []string{"small"}) {
			t.Fatalf("binds %v", got)
		}
	})

	t.Run("the small one may not break it", func(t *testing.T) {
		w := setup(t, wait)
		reserve(t, w)
		w.advance(time.Second)
		w.arrive("small", 1)
		rd := w.cycle()
		if len(rd.Binds) != 0 {
			t.Fatalf("binds %v", binds(rd))
		}
		if wt := waitOf(t, rd, "small"); wt.Status != cycle.NoFit || !strings.Contains(wt.Message, "reserved for a pod waiting longer") {
			t.Fatalf("small: %+v", wt)
		}
	})

	t.Run("it ends when the big one is placed", func(t *testing.T) {
		w := setup(t, wait)
		reserve(t, w)
		w.stop("r1")
		w.core.ClusterChanged()
		if got := binds(w.cycle()); !slices.Equal(got, []string{"big"}) {
			t.Fatalf("binds %v", got)
		}
		if what, _ := w.core.Reservation(); what != "" {
			t.Fatalf("reservation %q kept after big was placed", what)
		}
	})

	t.Run("it ends when the big one is removed", func(t *testing.T) {
		w := setup(t, wait)
		reserve(t, w)
		w.core.Remove("big")
		if what, _ := w.core.Reservation(); what != "" {
			t.Fatalf("reservation %q kept after big was removed", what)
		}
		w.arrive("small", 1)
		if got := binds(w.cycle()); !slices.Equal(got, []string{"small"}) {
			t.Fatalf("binds %v", got)
		}
	})
}

func TestGangReservation(t *testing.T) {
	w := newWorld(t, Config{ReservationWait: 30 * time.Second}, gpuNode("a", 2), gpuNode("b", 2))
	w.gangs["g"] = GangSpec{Min: 2}
	w.run("r1", 0, 0, []int{0}, t0.Add(-time.Hour))
	w.run("r2", 0, 1, []int{0}, t0.Add(-time.Hour))
	w.arrive("g1", 2, gang("g"))
	w.arrive("g2", 2, gang("g"))
	w.cycle()
	w.advance(30 * time.Second)
	w.cycle()
	if what, nodes := w.core.Reservation(); what != "gang g waiting longer" || !slices.Equal(nodes, []string{"a", "b"}) {
		t.Fatalf("reservation %q on %v, want gang g on [a b]", what, nodes)
	}
	w.advance(time.Second)
	w.arrive("small", 1)
	rd := w.cycle()
	if wt := waitOf(t, rd, "small"); wt.Status != cycle.NoFit || !strings.Contains(wt.Message, "reserved for gang g waiting longer") {
		t.Fatalf("small: %+v", wt)
	}
	w.stop("r1")
	w.stop("r2")
	w.core.ClusterChanged()
	if got := binds(w.cycle()); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Fatalf("binds %v", got)
	}
	if what, _ := w.core.Reservation(); what != "" {
		t.Fatalf("reservation %q kept after the gang was placed", what)
	}
}

func TestGangPreemption(t *testing.T) {
	w := newWorld(t, Config{Preemption: true, PreemptorWait: time.Minute}, gpuNode("a", 2))
	w.gangs["g"] = GangSpec{Min: 2}
	w.run("low1", 0, 0, []int{0}, t0.Add(-time.Hour))
	w.run("low2", 0, 0, []int{1}, t0.Add(-time.Hour))
	w.arrive("g1", 1, gang("g"), prio(5))
	w.arrive("g2", 1, gang("g"), prio(5))
	rd := w.cycle()
	if len(rd.Evictions) != 1 || rd.Evictions[0].For != "g1" || len(rd.Evictions[0].Victims) != 2 {
		t.Fatalf("evictions %v, want g1 naming both", evictions(rd))
	}
	w.advance(10 * time.Second)
	rd = w.cycle()
	if len(rd.Evictions) != 0 || !waitOf(t, rd, "g1").AwaitingVictims {
		t.Fatalf("evictions %v, g1 %+v: want it awaiting its victims", evictions(rd), waitOf(t, rd, "g1"))
	}
}

// TestPreemption: p (priority 5) fits only where low (priority 0) runs.
// The translation gives no priority: the item's is the workload's.
func TestPreemption(t *testing.T) {
	const wait = time.Minute
	w := newWorld(t, Config{Preemption: true, PreemptorWait: wait}, gpuNode("a", 1))
	w.run("low", 0, 0, []int{0}, t0.Add(-time.Hour))
	w.arrive("p", 1, prio(5))
	rd := w.cycle()
	if got := evictions(rd); !slices.Equal(got, []string{"p:low"}) {
		t.Fatalf("evictions %v, want p:low", got)
	}
	if wt := waitOf(t, rd, "p"); wt.Status != cycle.NoFit || wt.AwaitingVictims {
		t.Fatalf("p: %+v", wt)
	}
	for _, d := range []time.Duration{10 * time.Second, wait - 10*time.Second - time.Second} {
		w.advance(d)
		rd := w.cycle()
		if len(rd.Evictions) != 0 {
			t.Fatalf("at +%v: evictions %v while p awaits its victims", w.now.Sub(t0), evictions(rd))
		}
		if wt := waitOf(t, rd, "p"); !wt.AwaitingVictims {
			t.Fatalf("at +%v: %+v, want awaiting victims", w.now.Sub(t0), wt)
		}
	}
	w.advance(2 * time.Second) // past the preemptor wait
	if got := evictions(w.cycle()); !slices.Equal(got, []string{"p:low"}) {
		t.Fatalf("after the preemptor wait: evictions %v, want p:low again", got)
	}
	w.stop("low")
	w.core.ClusterChanged()
	if got := binds(w.cycle()); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("binds %v once low stopped", got)
	}
}

func TestStrict(t *testing.T) {
	t.Run("the first that waits holds up the rest, which are not backed off", func(t *testing.T) {
		w := newWorld(t, Config{Strict: true, InitialBackoff: 10 * time.Second, MaxBackoff: time.Minute}, gpuNode("a", 1))
		w.arrive("head", 2)
		w.arrive("b", 1)
		w.arrive("c", 1)
		rd := w.cycle()
		if len(rd.Binds) != 0 {
			t.Fatalf("binds %v overtook head", binds(rd))
		}
		if wt := waitOf(t, rd, "head"); wt.Status != cycle.NoFit || wt.Retry.IsZero() {
			t.Fatalf("head: %+v", wt)
		}
		for _, id := range []string{"b", "c"} {
			if wt := waitOf(t, rd, id); wt.Status != cycle.Behind || !wt.Retry.IsZero() || w.core.BackingOff(id, w.now) {
				t.Fatalf("%s: %+v, want behind with no backoff", id, wt)
			}
		}
	})

	for _, tc := range []struct {
		name    string
		unready bool
	}{
		{"the head backing off still holds up the rest", false},
		{"an unready head still holds up the rest", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Config{Strict: true, InitialBackoff: 10 * time.Second, MaxBackoff: time.Minute}, gpuNode("a", 1))
			w.arrive("head", 2)
			w.arrive("b", 1)
			if tc.unready {
				w.errs["head"] = Unready{Reason: "claim not made yet"}
			}
			for range 2 {
				if got := binds(w.cycle()); len(got) != 0 {
					t.Fatalf("at +%v: binds %v: b overtook head, which waits", w.now.Sub(t0), got)
				}
				w.advance(time.Second)
			}
		})
	}

	t.Run("without backoff", func(t *testing.T) {
		w := newWorld(t, Config{Strict: true}, gpuNode("a", 1))
		w.arrive("head", 2)
		w.arrive("b", 1)
		for range 3 {
			rd := w.cycle()
			if len(rd.Binds) != 0 || waitOf(t, rd, "b").Status != cycle.Behind {
				t.Fatalf("%+v", rd)
			}
			w.advance(time.Second)
		}
	})
}

// TestSkip: the workloads Frame.Skip names are left out untranslated, with
// no failure counted and no wait reported; a gang only when every member
// is named; in a strict cycle one left out holds up the rest.
func TestSkip(t *testing.T) {
	t.Run("left out", func(t *testing.T) {
		w := newWorld(t, Config{InitialBackoff: 10 * time.Second, MaxBackoff: time.Minute}, gpuNode("a", 1))
		w.arrive("big", 2)
		w.arrive("p", 1)
		if rd := w.cycle(); !slices.Equal(binds(rd), []string{"p"}) || waitOf(t, rd, "big").Status != cycle.NoFit {
			t.Fatalf("%+v", rd)
		}
		w.core.Bound("p")
		w.core.ClusterChanged() // big's backoff ends: only Skip leaves it out now
		f := w.frame()
		translate := f.Translate
		f.Translate = func(id string) (cycle.Workload, error) {
			if id == "big" {
				t.Errorf("big translated though skipped")
			}
			return translate(id)
		}
		f.Skip = func(id string) bool { return id == "big" }
		rd, err := w.core.Cycle(w.now, f)
		if err != nil {
			t.Fatal(err)
		}
		if rd.Tried != 0 || rd.Skipped != 1 || rd.BackingOff != 0 || len(rd.Waits) != 0 || !w.core.Waiting("big") {
			t.Fatalf("%+v: want big skipped, still waiting, no wait reported", rd)
		}
		if rd := w.cycle(); rd.Tried != 1 || rd.Skipped != 0 || waitOf(t, rd, "big").Status != cycle.NoFit {
			t.Fatalf("without Skip: %+v", rd)
		}
	})
	t.Run("a gang when every member is named", func(t *testing.T) {
		w := newWorld(t, Config{}, gpuNode("a", 1))
		w.gangs["g"] = GangSpec{Min: 2}
		w.arrive("g-0", 1, gang("g"))
		w.arrive("g-1", 1, gang("g"))
		for _, tc := range []struct {
			skip    []string
			skipped int
		}{{[]string{"g-0"}, 0}, {[]string{"g-0", "g-1"}, 2}} {
			f := w.frame()
			f.Skip = func(id string) bool { return slices.Contains(tc.skip, id) }
			rd, err := w.core.Cycle(w.now, f)
			if err != nil {
				t.Fatal(err)
			}
			if rd.Skipped != tc.skipped || (tc.skipped == 0) != (waitOf0(rd, "g-1") == cycle.GangMisfit) {
				t.Fatalf("skip %v: %+v; want %d skipped", tc.skip, rd, tc.skipped)
			}
		}
	})
	t.Run("strict: one skipped holds up the rest", func(t *testing.T) {
		w := newWorld(t, Config{Strict: true}, gpuNode("a", 1))
		w.arrive("head", 2)
		w.arrive("b", 1)
		f := w.frame()
		f.Skip = func(id string) bool { return id == "head" }
		rd, err := w.core.Cycle(w.now, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(rd.Binds) != 0 || rd.Skipped != 1 || waitOf(t, rd, "b").Status != cycle.Behind {
			t.Fatalf("%+v: want b behind the skipped head", rd)
		}
	})
}

// waitOf0 is id's status in rd's waits, or -1 when it has none.
func waitOf0(rd Ready, id string) cycle.Status {
	for _, w := range rd.Waits {
		if w.ID == id {
			return w.Status
		}
	}
	return -1
}

// TestTranslationNamesNoVictims: a translation with AwaitingVictims set
// names no victims, though the core would let it.
func TestTranslationNamesNoVictims(t *testing.T) {
	for _, awaiting := range []bool{false, true} {
		w := newWorld(t, Config{Preemption: true}, gpuNode("a", 1))
		w.run("low", 0, 0, []int{0}, t0.Add(-time.Hour))
		w.arrive("p", 1, prio(5))
		wl := w.ws["p"]
		wl.AwaitingVictims = awaiting
		w.ws["p"] = wl
		rd := w.cycle()
		if got := evictions(rd); (len(got) == 0) != awaiting {
			t.Errorf("translation awaiting victims %v: evictions %v", awaiting, got)
		}
	}
}
