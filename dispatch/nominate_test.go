package dispatch

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/placement"
)

// TestNominatedRoom: p (priority 5, one GPU) fits only where low (priority
// 0) runs, on node a, and names it. The room its victim frees is p's until
// p binds, goes, or is tried once its wait (a minute) is over: each case
// says who takes it in the cycles that follow.
func TestNominatedRoom(t *testing.T) {
	const wait = time.Minute
	earlier := func(it *Item) { it.Arrived = t0.Add(-time.Hour) } // ahead of p in its queue
	// start runs the cycle in which p names low; low has stopped by the
	// next one unless keep.
	start := func(t *testing.T, cfg Config, keep bool) *world {
		t.Helper()
		cfg.Preemption, cfg.PreemptorWait = true, wait
		w := newWorld(t, cfg, gpuNode("a", 1))
		w.run("low", 0, 0, []int{0}, t0.Add(-time.Hour))
		w.arrive("p", 1, prio(5))
		if got := evictions(w.cycle()); !slices.Equal(got, []string{"p:low"}) {
			t.Fatalf("evictions %v, want p:low", got)
		}
		if got := w.core.NominatedNodes(); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("nominated %v, want a", got)
		}
		if !keep {
			w.stop("low")
			w.core.ClusterChanged()
		}
		w.advance(10 * time.Second)
		return w
	}
	held := func(t *testing.T, rd Ready, id string) {
		t.Helper()
		if wt := waitOf(t, rd, id); !strings.Contains(wt.Message, "room held for pod p, which named victims there") {
			t.Errorf("%s: %q, want it kept out of p's room", id, wt.Message)
		}
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"an equal priority ahead of p does not take its room", func(t *testing.T) {
			w := start(t, Config{Noun: "pod"}, false)
			w.arrive("q", 1, prio(5), earlier)
			rd := w.cycle()
			if got := binds(rd); !slices.Equal(got, []string{"p"}) || rd.Order[0] != "q" {
				t.Fatalf("binds %v in the order %v, want p (q served first)", got, rd.Order)
			}
			held(t, rd, "q")
			if got := w.core.NominatedNodes(); len(got) != 0 {
				t.Errorf("nominated %v once p is placed, want none", got)
			}
		}},
		{"nor does a lower one aged ahead of it", func(t *testing.T) {
			w := start(t, Config{Noun: "pod", AgingStep: time.Second}, false)
			w.arrive("q", 1, prio(0), since(t0.Add(-time.Hour)))
			rd := w.cycle()
			if got := binds(rd); !slices.Equal(got, []string{"p"}) || rd.Order[0] != "q" {
				t.Fatalf("binds %v in the order %v, want p (q served first)", got, rd.Order)
			}
			held(t, rd, "q")
		}},
		{"a higher priority takes it", func(t *testing.T) {
			w := start(t, Config{Noun: "pod"}, false)
			w.arrive("q", 1, prio(9))
			if got := binds(w.cycle()); !slices.Equal(got, []string{"q"}) {
				t.Fatalf("binds %v, want q", got)
			}
		}},
		{"while its victims still run, the room they will free is held", func(t *testing.T) {
			// a has a second GPU, free: p asks both.
			w := newWorld(t, Config{Noun: "pod", Preemption: true, PreemptorWait: wait}, gpuNode("a", 2))
			w.run("low", 0, 0, []int{0}, t0.Add(-time.Hour))
			w.arrive("p", 2, prio(5))
			if got := evictions(w.cycle()); !slices.Equal(got, []string{"p:low"}) {
				t.Fatalf("evictions %v, want p:low", got)
			}
			w.advance(10 * time.Second)
			w.arrive("q", 1, prio(5), earlier)
			rd := w.cycle()
			if len(rd.Binds) != 0 || len(rd.Evictions) != 0 || !waitOf(t, rd, "p").AwaitingVictims {
				t.Fatalf("binds %v, evictions %v, p %+v: want nothing while low runs", binds(rd), evictions(rd), waitOf(t, rd, "p"))
			}
			held(t, rd, "q")
			w.stop("low")
			w.core.ClusterChanged()
			if got := binds(w.cycle()); !slices.Equal(got, []string{"p"}) {
				t.Fatalf("binds %v once low stopped, want p", got)
			}
		}},
		{"the hold ends when p goes", func(t *testing.T) {
			w := start(t, Config{Noun: "pod"}, false)
			w.arrive("q", 1, prio(5), earlier)
			w.core.Remove("p")
			if got := w.core.NominatedNodes(); len(got) != 0 {
				t.Fatalf("nominated %v once p went", got)
			}
			if got := binds(w.cycle()); !slices.Equal(got, []string{"q"}) {
				t.Fatalf("binds %v, want q", got)
			}
		}},
		{"the hold ends when p is tried once its wait is over", func(t *testing.T) {
			w := start(t, Config{Noun: "pod"}, false)
			w.ws["p"] = wholeGPUs("p", 2) // p no longer fits its room (nor names victims)
			w.arrive("q", 1, prio(5))     // behind p
			rd := w.cycle()
			if len(rd.Binds) != 0 || !waitOf(t, rd, "p").AwaitingVictims {
				t.Fatalf("binds %v, p %+v: want p awaiting its victims, nothing bound", binds(rd), waitOf(t, rd, "p"))
			}
			held(t, rd, "q")
			w.advance(wait)
			if got := binds(w.cycle()); !slices.Equal(got, []string{"q"}) {
				t.Fatalf("binds %v after p's wait, want q", got)
			}
			if got := w.core.NominatedNodes(); len(got) != 0 {
				t.Errorf("nominated %v after p's wait, want none", got)
			}
		}},
		{"a respecified p gives its room up", func(t *testing.T) {
			w := start(t, Config{Noun: "pod"}, false)
			w.arrive("q", 1, prio(5), earlier)
			w.core.Respecified("p")
			if got := w.core.NominatedNodes(); len(got) != 0 {
				t.Fatalf("nominated %v once p changed", got)
			}
		}},
		{"Skip never leaves p out of its room", func(t *testing.T) {
			w := start(t, Config{Noun: "pod"}, false)
			w.arrive("q", 1, prio(5), earlier)
			f := w.frame()
			f.Skip = func(string) bool { return true }
			rd, err := w.core.Cycle(w.now, f)
			if err != nil {
				t.Fatal(err)
			}
			if got := binds(rd); !slices.Equal(got, []string{"p"}) || rd.Skipped != 1 {
				t.Fatalf("binds %v, skipped %d: want p bound, q skipped", got, rd.Skipped)
			}
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// TestNominatedGangRoom: gang g (two one-GPU members, priority 5) needs
// low1 on a and low2 on b stopped; a workload of its priority served
// before it takes neither GPU.
func TestNominatedGangRoom(t *testing.T) {
	w := newWorld(t, Config{Preemption: true, PreemptorWait: time.Minute}, gpuNode("a", 1), gpuNode("b", 1))
	w.gangs["g"] = GangSpec{Min: 2}
	w.run("low1", 0, 0, []int{0}, t0.Add(-time.Hour))
	w.run("low2", 0, 1, []int{0}, t0.Add(-time.Hour))
	w.arrive("g1", 1, gang("g"), prio(5))
	w.arrive("g2", 1, gang("g"), prio(5))
	if rd := w.cycle(); len(rd.Evictions) != 1 || len(rd.Evictions[0].Victims) != 2 {
		t.Fatalf("evictions %v, want g1 naming low1 and low2", evictions(rd))
	}
	if got := w.core.NominatedNodes(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("nominated %v, want a and b", got)
	}
	w.stop("low1")
	w.stop("low2")
	w.core.ClusterChanged()
	w.advance(10 * time.Second)
	w.arrive("q", 1, prio(5), func(it *Item) { it.Arrived = t0.Add(-time.Hour) })
	rd := w.cycle()
	if got := binds(rd); !slices.Equal(got, []string{"g1", "g2"}) || rd.Order[0] != "q" {
		t.Fatalf("binds %v in the order %v, want g1 and g2 (q served first)", got, rd.Order)
	}
	if wt := waitOf(t, rd, "q"); !strings.Contains(wt.Message, "room held for gang g") {
		t.Errorf("q: %q, want it kept out of g's room", wt.Message)
	}
}

// TestNominationOnTheBooks: on the core's books, p (priority 5, one GPU)
// names low, the only workload on node a's one GPU. While low is booked
// the room stays held (low is still a victim, a stays nominated); once
// low is released p binds there; and a nomination whose node leaves the
// books is dropped with its room (p waits on, nominating nothing).
func TestNominationOnTheBooks(t *testing.T) {
	node := func(name string) inventory.Node {
		return inventory.Node{Name: name, CPUMilli: 64000, MemoryMiB: 512 << 10, GPUs: []inventory.GPU{
			{UUID: name + "-gpu", Index: 0, Model: "H200", MemoryMiB: 143771, Health: inventory.Healthy, NUMANode: -1}}}
	}
	low := booked.Hold{ID: "low", Node: "a", Key: "low", Started: t0.Add(-time.Hour), Groups: [][]binding.Share{{{UUID: "a-gpu",
		ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 143771, MemoryLimitMiB: 143771}}}}
	start := func(t *testing.T) (*Core, Frame) {
		t.Helper()
		c, err := New(Config{Preemption: true, PreemptorWait: time.Minute, Noun: "pod"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Books().SetNode(node("a"), ""); err != nil {
			t.Fatal(err)
		}
		if err := c.Books().Book(low); err != nil {
			t.Fatal(err)
		}
		pol, err := placement.New("bestfit", placement.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		f := Frame{Policy: pol, Translate: func(id string) (cycle.Workload, error) { return wholeGPUs(id, 1), nil }}
		c.Add(Item{ID: "p", Priority: 5, Arrived: t0})
		rd, err := c.Cycle(t0, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := evictions(rd); !slices.Equal(got, []string{"p:low"}) {
			t.Fatalf("evictions %v, want p:low", got)
		}
		return c, f
	}
	cycleAt := func(t *testing.T, c *Core, f Frame, at time.Time) Ready {
		t.Helper()
		rd, err := c.Cycle(at, f)
		if err != nil {
			t.Fatal(err)
		}
		return rd
	}
	t.Run("held while the victim is booked, bound once it is released", func(t *testing.T) {
		c, f := start(t)
		c.Add(Item{ID: "q", Priority: 5, Arrived: t0.Add(-time.Hour)}) // served before p
		rd := cycleAt(t, c, f, t0.Add(time.Second))
		if len(rd.Binds) != 0 || len(rd.Evictions) != 0 || !waitOf(t, rd, "p").AwaitingVictims {
			t.Fatalf("binds %v, evictions %v, p %+v: want p awaiting low, nothing bound", binds(rd), evictions(rd), waitOf(t, rd, "p"))
		}
		if got := c.NominatedNodes(); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("nominated %v while low is booked, want a", got)
		}
		c.Books().Release("low")
		c.ClusterChanged()
		rd = cycleAt(t, c, f, t0.Add(2*time.Second))
		if got := binds(rd); !slices.Equal(got, []string{"p"}) {
			t.Fatalf("binds %v once low is released, want p (q kept out of its room)", got)
		}
		if wt := waitOf(t, rd, "q"); !strings.Contains(wt.Message, "room held for pod p") {
			t.Errorf("q: %q, want it kept out of p's room", wt.Message)
		}
	})
	t.Run("dropped when its node leaves", func(t *testing.T) {
		c, f := start(t)
		c.Books().RemoveNode("a")
		b := node("b")
		b.GPUs = nil // p fits nowhere now, and names no one
		if err := c.Books().SetNode(b, ""); err != nil {
			t.Fatal(err)
		}
		rd := cycleAt(t, c, f, t0.Add(time.Second))
		if got := c.NominatedNodes(); len(got) != 0 {
			t.Fatalf("nominated %v once a left, want none", got)
		}
		if len(rd.Binds) != 0 || len(rd.Evictions) != 0 {
			t.Fatalf("binds %v, evictions %v on a node with no GPU", binds(rd), evictions(rd))
		}
	})
}
