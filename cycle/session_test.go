package cycle

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// gpus is a node with n whole A100-80GB GPUs and plenty of CPU and memory.
func gpus(name string, n int) placement.Node {
	return placement.NewNode(name, 64000, 512*1024, n, "A100-80GB", 81920)
}

// whole is a workload asking n whole GPUs.
func whole(id string, n int) Workload {
	return Workload{ID: id, Parts: []placement.Pod{{Name: id, CPUMilli: 1000, GPU: request.GPU{Count: n, ComputeMilli: request.Whole}}}}
}

// share is a workload asking a fraction of one GPU (milli).
func share(id string, milli int64) Workload {
	return Workload{ID: id, Parts: []placement.Pod{{Name: id, CPUMilli: 1000, GPU: request.GPU{Count: 1, ComputeMilli: milli}}}}
}

func inGang(w Workload, gang string) Workload { w.Gang = gang; return w }
func inQueue(w Workload, q string) Workload   { w.Queue = q; return w }

func bestfit(t *testing.T) placement.Policy {
	t.Helper()
	p, err := placement.New("bestfit", placement.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tree(t *testing.T, qs ...queueing.Queue) *queueing.Tree {
	t.Helper()
	tr, err := queueing.NewTree(qs)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func statuses(outs []Outcome) map[string]Status {
	m := map[string]Status{}
	for _, o := range outs {
		m[o.Workload] = o.Status
	}
	return m
}

func served(outs []Outcome) []string {
	var ids []string
	for _, o := range outs {
		ids = append(ids, o.Workload)
	}
	return ids
}

// TestRun drives hand-built snapshots whose right answer is known.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []placement.Node
		queue *queueing.Tree
		usage map[string]queueing.Resources
		pend  []Workload
		gangs map[string]Gang
		want  map[string]Status
		order []string // the order served, when it matters
		msg   map[string]string
	}{
		{
			name:  "gang that fits whole is placed",
			nodes: []placement.Node{gpus("a", 1), gpus("b", 1)},
			pend:  []Workload{inGang(whole("g-0", 1), "g"), inGang(whole("g-1", 1), "g")},
			gangs: map[string]Gang{"g": {MinMember: 2}},
			want:  map[string]Status{"g-0": Placed, "g-1": Placed},
		},
		{
			name:  "gang that fits only in part: none is placed, and a later workload takes the room",
			nodes: []placement.Node{gpus("a", 1), gpus("b", 1)},
			pend:  []Workload{inGang(whole("g-0", 1), "g"), inGang(whole("g-1", 1), "g"), inGang(whole("g-2", 1), "g"), whole("solo", 1)},
			gangs: map[string]Gang{"g": {MinMember: 3}},
			want:  map[string]Status{"g-0": GangMisfit, "g-1": GangMisfit, "g-2": GangMisfit, "solo": Placed},
			msg:   map[string]string{"g-0": "only 2 of the 3 members still needed fit, so none is placed"},
		},
		{
			name:  "gang members already running count toward the minimum",
			nodes: []placement.Node{gpus("a", 1)},
			pend:  []Workload{inGang(whole("g-2", 1), "g")},
			gangs: map[string]Gang{"g": {MinMember: 3, Running: 2}},
			want:  map[string]Status{"g-2": Placed},
		},
		{
			name:  "gang beyond its minimum: the members that do not fit wait, the others run",
			nodes: []placement.Node{gpus("a", 2)},
			pend:  []Workload{inGang(whole("g-0", 1), "g"), inGang(whole("g-1", 1), "g"), inGang(whole("g-2", 1), "g")},
			gangs: map[string]Gang{"g": {MinMember: 2}},
			want:  map[string]Status{"g-0": Placed, "g-1": Placed, "g-2": NoFit},
		},
		{
			name:  "incomplete gang waits for its members",
			nodes: []placement.Node{gpus("a", 8)},
			pend:  []Workload{inGang(whole("g-0", 1), "g")},
			gangs: map[string]Gang{"g": {MinMember: 4, Running: 1}},
			want:  map[string]Status{"g-0": GangWaiting},
			msg:   map[string]string{"g-0": "2 of 4 members exist (1 running, 1 pending)"},
		},
		{
			name:  "gang without a known minimum is invalid",
			nodes: []placement.Node{gpus("a", 8)},
			pend:  []Workload{inGang(whole("g-0", 1), "g")},
			want:  map[string]Status{"g-0": Invalid},
		},
		{
			name:  "queue at its hard limit: its next workload waits, another queue's runs",
			nodes: []placement.Node{gpus("a", 4)},
			queue: tree(t, queueing.Queue{Name: "capped", Limit: queueing.Resources{GPUMilli: 1500}}, queueing.Queue{Name: "free"}),
			pend:  []Workload{inQueue(whole("c-0", 1), "capped"), inQueue(whole("c-1", 1), "capped"), inQueue(whole("f-0", 1), "free")},
			want:  map[string]Status{"c-0": Placed, "c-1": QueueLimit, "f-0": Placed},
			msg:   map[string]string{"c-1": "queue capped"},
		},
		{
			name:  "unknown queue is invalid",
			nodes: []placement.Node{gpus("a", 1)},
			pend:  []Workload{inQueue(whole("x", 1), "nope")},
			want:  map[string]Status{"x": Invalid},
			msg:   map[string]string{"x": `queue "nope" does not exist`},
		},
		{
			name:  "fair share: the queue using less goes first, whatever the pending order",
			nodes: []placement.Node{gpus("a", 1)},
			queue: tree(t, queueing.Queue{Name: "rich"}, queueing.Queue{Name: "poor"}),
			usage: map[string]queueing.Resources{"rich": {GPUMilli: 4000}},
			pend:  []Workload{inQueue(whole("r", 1), "rich"), inQueue(whole("p", 1), "poor")},
			want:  map[string]Status{"p": Placed, "r": NoFit},
			order: []string{"p", "r"},
		},
		{
			name:  "a workload's parts share one node",
			nodes: []placement.Node{gpus("a", 1), gpus("b", 2)},
			pend: []Workload{{ID: "two", Parts: []placement.Pod{
				{Name: "two/a", CPUMilli: 1000, GPU: request.GPU{Count: 1, ComputeMilli: request.Whole}},
				{Name: "two/b", GPU: request.GPU{Count: 1, ComputeMilli: request.Whole}},
			}}},
			want: map[string]Status{"two": Placed},
		},
		{
			name:  "parts that fit only apart wait, and book nothing",
			nodes: []placement.Node{gpus("a", 1), gpus("b", 1)},
			pend: []Workload{{ID: "two", Parts: []placement.Pod{
				{Name: "two/a", CPUMilli: 1000, GPU: request.GPU{Count: 1, ComputeMilli: request.Whole}},
				{Name: "two/b", GPU: request.GPU{Count: 1, ComputeMilli: request.Whole}},
			}}, whole("after", 1)},
			want: map[string]Status{"two": NoFit, "after": Placed},
			msg:  map[string]string{"two": "2 nodes: " + notTogether},
		},
		{
			name:  "excluded nodes are never used",
			nodes: []placement.Node{gpus("a", 1), gpus("b", 1)},
			pend: []Workload{{ID: "picky", Parts: whole("picky", 1).Parts, Exclude: func(i int) string {
				if i == 0 {
					return "node a is reserved"
				}
				return ""
			}}, func() Workload {
				w := whole("picky-2", 1)
				w.Exclude = func(i int) string {
					if i == 0 {
						return "node a is reserved"
					}
					return ""
				}
				return w
			}()},
			want: map[string]Status{"picky": Placed, "picky-2": NoFit},
			msg:  map[string]string{"picky-2": "1 node: node a is reserved"},
		},
		{
			name:  "an equal request after a misfit gets the same answer",
			nodes: []placement.Node{gpus("a", 1)},
			pend:  []Workload{whole("big-0", 2), whole("big-1", 2), share("small", 500)},
			want:  map[string]Status{"big-0": NoFit, "big-1": NoFit, "small": Placed},
			msg:   map[string]string{"big-1": "no node fits big-0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &placement.Cluster{Nodes: tc.nodes}
			outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Queues: tc.queue, Usage: tc.usage, Pending: tc.pend, Gangs: tc.gangs})
			if err != nil {
				t.Fatal(err)
			}
			if got := statuses(outs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("statuses %v, want %v (outcomes %+v)", got, tc.want, outs)
			}
			if tc.order != nil && !reflect.DeepEqual(served(outs), tc.order) {
				t.Errorf("served %v, want %v", served(outs), tc.order)
			}
			for _, o := range outs {
				if want, ok := tc.msg[o.Workload]; ok && !strings.Contains(o.Message, want) {
					t.Errorf("%s: message %q, want it to contain %q", o.Workload, o.Message, want)
				}
				if (o.Status == Placed) != (len(o.Decisions) > 0) {
					t.Errorf("%s: status %v with %d decisions", o.Workload, o.Status, len(o.Decisions))
				}
			}
			// What the cycle placed is booked, and nothing else: releasing
			// every decision gives the snapshot back.
			for _, o := range outs {
				if o.Status != Placed {
					continue
				}
				w := find(tc.pend, o.Workload)
				node := o.Decisions[0].Node
				for i, d := range o.Decisions {
					if d.Node != node {
						t.Errorf("%s: part %d on node %d, part 0 on %d", o.Workload, i, d.Node, node)
					}
					if err := c.Release(&w.Parts[i], d); err != nil {
						t.Errorf("%s: release part %d: %v", o.Workload, i, err)
					}
				}
			}
			fresh := &placement.Cluster{Nodes: freshNodes(tc.nodes)}
			if got, want := free(c), free(fresh); !reflect.DeepEqual(got, want) {
				t.Errorf("after releasing every placement the cluster's free capacity is %v, want the snapshot's %v", got, want)
			}
		})
	}
}

func find(ws []Workload, id string) Workload {
	for _, w := range ws {
		if w.ID == id {
			return w
		}
	}
	return Workload{}
}

// free lists every node's free CPU and memory and every GPU's free compute
// and memory.
func free(c *placement.Cluster) []int64 {
	var out []int64
	for _, n := range c.Nodes {
		out = append(out, n.FreeCPUMilli, n.FreeMemoryMiB)
		for _, g := range n.GPUs {
			out = append(out, g.FreeMilli, g.FreeMemoryMiB)
		}
	}
	return out
}

// freshNodes rebuilds nodes as the test cases make them (all free).
func freshNodes(nodes []placement.Node) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = gpus(n.Name, len(n.GPUs))
	}
	return out
}

// TestRejectionsCountNodesByReason: a workload no node takes says how many
// nodes turned it down for each reason.
func TestRejectionsCountNodesByReason(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 1), gpus("b", 1), gpus("c", 4), placement.NewNode("cpu", 1000, 1024, 0, "", 0)}}
	outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{whole("w", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	o := outs[0]
	if o.Status != Placed {
		t.Fatalf("2 whole GPUs on a 4-GPU node: %v %s", o.Status, o.Message)
	}
	outs, err = Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: []Workload{whole("w3", 3)}})
	if err != nil {
		t.Fatal(err)
	}
	o = outs[0]
	total := 0
	for _, n := range o.Rejections {
		total += n
	}
	if o.Status != NoFit || total != 4 || len(o.Rejections) < 2 {
		t.Fatalf("3 whole GPUs with 2 free at most: %v, rejections %v (want all 4 nodes counted, by at least 2 reasons)", o.Status, o.Rejections)
	}
}

// TestStatementDiscardRestores: bookings discarded leave the cluster equal
// to what it was.
func TestStatementDiscardRestores(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2), gpus("b", 2)}}
	before := c.Clone()
	st := NewStatement(c)
	p := placement.Pod{Name: "p", CPUMilli: 500, MemoryMiB: 100, GPU: request.GPU{Count: 1, ComputeMilli: 300, MemoryMiB: 1000}}
	for _, d := range []placement.Decision{{Node: 0, GPUs: []int{1}}, {Node: 1, GPUs: []int{0}}, {Node: 0, GPUs: []int{1}}} {
		if err := st.Book(p, d); err != nil {
			t.Fatal(err)
		}
	}
	if st.Len() != 3 || reflect.DeepEqual(free(c), free(before)) {
		t.Fatalf("after 3 bookings: %d recorded, free capacity %v", st.Len(), free(c))
	}
	if err := st.Discard(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(free(c), free(before)) || st.Len() != 0 {
		t.Fatalf("after Discard the cluster differs:\n%+v\nwant\n%+v", c.Nodes, before.Nodes)
	}
	if err := st.Book(p, placement.Decision{Node: 0, GPUs: []int{5}}); err == nil {
		t.Fatal("a booking on a GPU the node lacks was accepted")
	}
}

// TestStrictNoOvertaking: in a strict cycle the first workload that does
// not fit holds up the rest, even those that would fit, and the order is
// the caller's across queues (not fair share).
func TestStrictNoOvertaking(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2)}}
	qs := tree(t, queueing.Queue{Name: "rich"}, queueing.Queue{Name: "poor"})
	pend := []Workload{inQueue(whole("r0", 1), "rich"), inQueue(whole("big", 2), "rich"), inQueue(whole("p0", 1), "poor")}
	outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Queues: qs, Usage: map[string]queueing.Resources{"rich": {GPUMilli: 8000}},
		Pending: pend, Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Status{"r0": Placed, "big": NoFit, "p0": Behind}
	if got := statuses(outs); !reflect.DeepEqual(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	if got := served(outs); !reflect.DeepEqual(got, []string{"r0", "big", "p0"}) {
		t.Errorf("served %v, want the caller's order", got)
	}
	if o := outs[2]; !strings.Contains(o.Message, "behind big") {
		t.Errorf("p0's message %q does not name big", o.Message)
	}
	// The same snapshot without Strict: p0 (the poorer queue) goes first
	// and big does not hold anything up.
	c = &placement.Cluster{Nodes: []placement.Node{gpus("a", 2)}}
	outs, err = Run(Snapshot{Cluster: c, Policy: bestfit(t), Queues: qs, Usage: map[string]queueing.Resources{"rich": {GPUMilli: 8000}}, Pending: pend})
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(outs); !reflect.DeepEqual(got, map[string]Status{"p0": Placed, "r0": Placed, "big": NoFit}) {
		t.Fatalf("without Strict: statuses %v", got)
	}
}
