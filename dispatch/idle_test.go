package dispatch

import (
	"slices"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
)

// TestIdleReclaim: nb, a notebook in a queue that reclaims idle holders
// after an hour, holds the only GPU; p, of another queue, of no higher
// priority and with no guarantee to reclaim, waits for it. nb is stopped
// for p once it has been idle an hour, not a second before; with the
// setting off, or no idle marks given, it never is.
func TestIdleReclaim(t *testing.T) {
	const after = time.Hour
	idleFrom := t0.Add(-after + time.Minute) // an hour idle at t0+1m
	for _, tc := range []struct {
		name    string
		setting time.Duration
		marks   bool
		wait    time.Duration
		want    []string
		// early: it started after its mark (the mark is an earlier
		// workload's of its ID).
		early bool
	}{
		{"a second short of the time", after, true, time.Minute - time.Second, nil, false},
		{"at the time", after, true, time.Minute, []string{"p:nb"}, false},
		{"setting off, idle a day", 0, true, 24 * time.Hour, nil, false},
		{"no marks given, a day later", after, false, 24 * time.Hour, nil, false},
		{"a mark from before it started (an earlier workload of its ID)", after, true, 24 * time.Hour, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Config{Preemption: true, PreemptorWait: time.Minute}, gpuNode("a", 1))
			tree, err := queueing.NewTree([]queueing.Queue{{Name: "notebooks", IdleReclaimAfter: tc.setting}, {Name: "batch"}})
			if err != nil {
				t.Fatal(err)
			}
			w.queues = tree
			started := t0.Add(-48 * time.Hour)
			if tc.early {
				started = idleFrom.Add(time.Second)
			}
			w.run("nb", 5, 0, []int{0}, started)
			w.running[0].Queue = "notebooks"
			w.arrive("p", 1, queue("batch"))
			w.advance(tc.wait)
			f := w.frame()
			if tc.marks {
				f.IdleSince = func(id string) time.Time {
					if id == "nb" {
						return idleFrom
					}
					return time.Time{}
				}
			}
			rd, err := w.core.Cycle(w.now, f)
			if err != nil {
				t.Fatal(err)
			}
			if got := evictions(rd); !slices.Equal(got, tc.want) {
				t.Fatalf("evictions %v, want %v", got, tc.want)
			}
			if len(rd.Evictions) == 1 && rd.Evictions[0].Victims[0].Kind != preemption.ByIdle {
				t.Errorf("victim kind %v, want idle", rd.Evictions[0].Victims[0].Kind)
			}
			if !f.Running[0].IdleSince.IsZero() {
				t.Error("the mark was written into the frame's running workloads, not a copy")
			}
		})
	}
}
