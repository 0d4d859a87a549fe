package dispatch

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/placement"
)

// learner is a policy that records the arrivals it is told of.
type learner struct {
	placement.Policy
	told *[]string
	name string
}

func (l learner) Observe(p *placement.Pod) { *l.told = append(*l.told, l.name+":"+p.Name) }

// TestArrivalsTaughtOnce: the policies learn of each workload once, at
// the start of the cycle after it arrived, in arrival order; again as
// another instance; never one that left first or that the front door says
// teaches nothing; a workload's own policy learns too, unless it is the
// frame's.
func TestArrivalsTaughtOnce(t *testing.T) {
	w := newWorld(t, Config{}, gpuNode("a", 1))
	var told []string
	def := learner{Policy: w.policy, told: &told, name: "def"}
	own := learner{Policy: w.policy, told: &told, name: "own"}
	nothing := map[string]bool{"invalid": true}
	cycleNow := func() {
		t.Helper()
		f := w.frame()
		f.Policy = def
		f.Arrival = func(id string) (placement.Policy, []placement.Pod, bool) {
			if nothing[id] {
				return nil, nil, false
			}
			parts := []placement.Pod{{Name: id + "/0"}}
			if strings.HasPrefix(id, "two") {
				parts = append(parts, placement.Pod{Name: id + "/1"})
			}
			switch {
			case strings.HasPrefix(id, "own"):
				return own, parts, true
			case strings.HasPrefix(id, "same"):
				return def, parts, true
			}
			return nil, parts, true
		}
		if _, err := w.core.Cycle(w.now, f); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(step string, want ...string) {
		t.Helper()
		if !slices.Equal(told, want) {
			t.Fatalf("%s: told %v, want %v", step, told, want)
		}
		told = nil
	}
	w.arrive("big", 4) // never fits: waits through every cycle below
	w.advance(time.Second)
	w.arrive("two", 4)
	w.arrive("own", 4)
	w.arrive("same", 4)
	w.arrive("invalid", 4)
	first := w.arrive("early", 4)
	first.Arrived = t0.Add(-time.Hour) // arrived first though added last
	w.core.Update(first, false)
	expect("before any cycle")
	cycleNow()
	expect("first cycle", "def:early/0", "def:big/0", "def:two/0", "def:two/1", "def:own/0", "own:own/0", "def:same/0")
	cycleNow()
	w.core.Update(w.item("two"), true) // respecified, not made again
	cycleNow()
	expect("cycles with no new arrival")

	w.core.Remove("big")
	it := w.item("big")
	it.Instance = "again"
	w.core.Add(it)
	w.arrive("gone", 4)
	w.core.Remove("gone")
	cycleNow()
	expect("made again; one that left before the cycle", "def:big/0")
}
