package cycle

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/placement"
)

// TestPodSlotsInACycle: on a node allowing 2 pods with both taken (its
// GPUs mostly free), a pod of equal priority waits with the pod count as
// the reason; one of higher priority stops one running pod, which frees
// the slot it needs, and plans no more.
func TestPodSlotsInACycle(t *testing.T) {
	for _, tc := range []struct {
		prio int32
		want map[string][]string
	}{
		{0, map[string][]string{}},
		{5, map[string][]string{"p": {"low-new/priority"}}},
	} {
		c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 4)}}
		c.Nodes[0].Pods, c.Nodes[0].FreePods = 2, 2
		var run []Running
		for i, id := range []string{"low-old", "low-new"} {
			w := share(id, 250)
			w.Parts[0].Slot = true
			d := placement.Decision{Node: 0, GPUs: []int{i}}
			if err := c.Apply(&w.Parts[0], d); err != nil {
				t.Fatal(err)
			}
			run = append(run, Running{ID: id, Started: t0.Add(-time.Duration(2-i) * time.Hour), Parts: w.Parts, Decisions: []placement.Decision{d}})
		}
		p := share("p", 250)
		p.Parts[0].Slot = true
		p.Priority = tc.prio
		outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{p}, Running: run,
			Preemption: &Preemption{Now: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if got := victims(outs); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("priority %d: victims %v, want %v (outcomes %+v)", tc.prio, got, tc.want, outs)
		}
		if outs[0].Status != NoFit {
			t.Errorf("priority %d: status %v, want NoFit", tc.prio, outs[0].Status)
		}
		if tc.prio == 0 && !strings.Contains(outs[0].Message, "1 node: node pod limit 2 reached") {
			t.Errorf("message %q lacks the pod count", outs[0].Message)
		}
	}
}
