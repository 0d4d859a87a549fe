package cycle

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/placement"
)

func TestReserve(t *testing.T) {
	half := func(n placement.Node) placement.Node { // every GPU half taken
		for i := range n.GPUs {
			n.GPUs[i].FreeMilli = 500
		}
		return n
	}
	l4s := func(name string, n int) placement.Node {
		return placement.NewNode(name, 64000, 512*1024, n, "L4", 23034)
	}
	models := func(w Workload, allowed ...string) Workload {
		w.Parts[0].GPU.Models = allowed
		return w
	}
	only := func(w Workload, ok ...int) Workload {
		w.Exclude = func(i int) string {
			for _, o := range ok {
				if o == i {
					return ""
				}
			}
			return "node selector does not match"
		}
		return w
	}
	for _, tc := range []struct {
		name   string
		nodes  []placement.Node
		ws     []Workload
		want   map[int]bool
		wantOK bool
	}{
		{"the node with the most free compute", []placement.Node{half(gpus("a", 2)), gpus("b", 1), gpus("c", 2)},
			[]Workload{whole("w", 1)}, map[int]bool{2: true}, true},
		{"room beats free compute: 4 GPUs need a node of 4", []placement.Node{half(gpus("a", 4)), gpus("b", 2)},
			[]Workload{whole("w", 4)}, map[int]bool{0: true}, true},
		{"a gang's members spread as the first one's take compute", []placement.Node{gpus("a", 2), gpus("b", 2)},
			[]Workload{whole("m1", 2), whole("m2", 2)}, map[int]bool{0: true, 1: true}, true},
		{"only nodes the workload may use", []placement.Node{gpus("a", 8), gpus("b", 1)},
			[]Workload{only(whole("w", 1), 1)}, map[int]bool{1: true}, true},
		{"no node it may use: no reservation", []placement.Node{gpus("a", 8)},
			[]Workload{only(whole("w", 1))}, nil, false},
		{"only nodes with a GPU of an allowed model", []placement.Node{gpus("a", 8), l4s("b", 2)},
			[]Workload{models(whole("w", 2), "L4")}, map[int]bool{1: true}, true},
		{"no node of an allowed model: no reservation", []placement.Node{gpus("a", 8)},
			[]Workload{models(whole("w", 1), "L4")}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &placement.Cluster{Nodes: tc.nodes}
			got, ok := Reserve(c, tc.ws)
			if ok != tc.wantOK || (ok && !reflect.DeepEqual(got, tc.want)) {
				t.Fatalf("Reserve = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestBackfillAroundReservation: node a is reserved for a waiting 2-GPU
// workload. A small workload may use a's spare GPU (the reserved one still
// fits beside it) but not a GPU the reserved one needs; one that would
// break the reservation goes to another node, or waits naming it.
func TestBackfillAroundReservation(t *testing.T) {
	big := whole("big", 2)
	res := &Reservation{What: "big waiting longer", Nodes: map[int]bool{0: true}, For: []Workload{big}, Members: map[string]bool{"big": true}}
	for _, tc := range []struct {
		name     string
		nodes    []placement.Node
		pend     []Workload
		want     map[string]Status
		wantNode map[string]int
		msg      string
	}{
		{"backfill on a reserved node's spare GPU", []placement.Node{gpus("a", 3), gpus("b", 1)},
			[]Workload{whole("small", 1)}, map[string]Status{"small": Placed}, nil, ""},
		{"a workload that would break it goes elsewhere", []placement.Node{gpus("a", 2), gpus("b", 1)},
			[]Workload{whole("small", 1)}, map[string]Status{"small": Placed}, map[string]int{"small": 1}, ""},
		{"or waits, naming the reservation", []placement.Node{gpus("a", 2)},
			[]Workload{whole("small", 1)}, map[string]Status{"small": NoFit}, nil, "1 node: reserved for big waiting longer"},
		{"the reservation's own workload uses it", []placement.Node{gpus("a", 2)},
			[]Workload{big}, map[string]Status{"big": Placed}, map[string]int{"big": 0}, ""},
		{"an equal request's misfit does not hold the reservation's own workload back", []placement.Node{gpus("a", 2)},
			[]Workload{whole("twin", 2), big}, map[string]Status{"twin": NoFit, "big": Placed}, map[string]int{"big": 0}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &placement.Cluster{Nodes: tc.nodes}
			before := c.Clone()
			outs, err := Run(Snapshot{Cluster: c, Policy: bestfit(t), Pending: tc.pend, Reservation: res})
			if err != nil {
				t.Fatal(err)
			}
			if got := statuses(outs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("statuses %v, want %v (%+v)", got, tc.want, outs)
			}
			placed := false
			for _, o := range outs {
				placed = placed || o.Status == Placed
			}
			for _, o := range outs {
				if n, ok := tc.wantNode[o.Workload]; ok && o.Decisions[0].Node != n {
					t.Errorf("%s on node %d, want %d", o.Workload, o.Decisions[0].Node, n)
				}
				if tc.msg != "" && !strings.Contains(o.Message, tc.msg) {
					t.Errorf("%s: message %q, want it to contain %q", o.Workload, o.Message, tc.msg)
				}
				if !placed && !reflect.DeepEqual(free(c), free(before)) {
					t.Errorf("a workload that waits changed the cluster: free %v, was %v", free(c), free(before))
				}
			}
		})
	}
}

// TestReservationFitsLeavesClusterAlone: the backfill check works on a copy.
func TestReservationFitsLeavesClusterAlone(t *testing.T) {
	c := &placement.Cluster{Nodes: []placement.Node{gpus("a", 2)}}
	before := c.Clone()
	res := &Reservation{What: "w", For: []Workload{whole("w", 2)}}
	if ok, err := res.Fits(c, bestfit(t)); err != nil || !ok {
		t.Fatalf("Fits = %v, %v; want true", ok, err)
	}
	if !reflect.DeepEqual(free(c), free(before)) {
		t.Fatal("Fits changed the cluster")
	}
	res.For = append(res.For, whole("x", 1))
	if ok, _ := res.Fits(c, bestfit(t)); ok {
		t.Fatal("3 GPUs fit on 2")
	}
}
