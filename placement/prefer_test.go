package placement

import (
	"errors"
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
)

// TestPreferAmongTies: a pod's preference settles the nodes every policy
// scores alike (identical CPU nodes: CPU-only pods tie everywhere), and
// never outweighs the policy's own score (best fit keeps a share on the
// GPU node it already uses, the preference notwithstanding); a pod
// without one is decided as before; an error from it fails the decision.
func TestPreferAmongTies(t *testing.T) {
	cpuNodes := func() *Cluster {
		return cluster(t, inventory.Node{Name: "a", CPUMilli: 8000, MemoryMiB: 1 << 15},
			inventory.Node{Name: "b", CPUMilli: 8000, MemoryMiB: 1 << 15},
			inventory.Node{Name: "c", CPUMilli: 8000, MemoryMiB: 1 << 15})
	}
	rates := func(r ...int64) func(*Cluster) ([]int64, error) {
		return func(*Cluster) ([]int64, error) { return r, nil }
	}
	for _, name := range Names() {
		pol, err := New(name, Options{Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		for want, r := range map[int][]int64{0: {9, 1, 1}, 1: {0, 5, 4}, 2: {0, 0, 100}} {
			p := cpuPod("pref", 100)
			p.Prefer = rates(r...)
			d, err := pol.Place(cpuNodes(), &p)
			if err != nil || d.Node != want {
				t.Errorf("%s: preference %v: node %d (err %v), want %d", name, r, d.Node, err, want)
			}
		}
	}

	pol, err := New("bestfit", Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	c := cluster(t, plainInv("g1", "H100", 8), plainInv("g2", "H100", 8))
	place(t, c, pol, sharePod("first", 1000, 500))
	used := -1
	for i, n := range c.Nodes {
		if n.GPUs[0].FreeMilli < 1000 || n.GPUs[len(n.GPUs)-1].FreeMilli < 1000 {
			used = i
		}
	}
	if used < 0 {
		t.Fatal("no GPU share booked")
	}
	plain := sharePod("second", 1000, 500)
	want, err := pol.Place(c, &plain)
	if err != nil {
		t.Fatal(err)
	}
	pref := make([]int64, 2)
	pref[1-want.Node] = 100 // the other node preferred
	second := sharePod("second", 1000, 500)
	second.Prefer = rates(pref...)
	if want.Node != used {
		t.Fatalf("best fit put the second share on node %d, not beside the first on %d", want.Node, used)
	}
	if d, err := pol.Place(c, &second); err != nil || d.Node != want.Node {
		t.Errorf("second share preferring node %d: node %d (err %v), want %d (the policy's pick)", 1-want.Node, d.Node, err, want.Node)
	}

	broken := cpuPod("broken", 100)
	broken.Prefer = func(*Cluster) ([]int64, error) { return nil, errors.New("plugin failed") }
	if _, err := pol.Place(cpuNodes(), &broken); err == nil {
		t.Errorf("a preference that fails: no error")
	}
}

// TestOpensCordoned: a node closed only as cordoned takes a pod that
// tolerates the cordon, under every policy, and nothing else; a node
// closed for another reason takes neither.
func TestOpensCordoned(t *testing.T) {
	for _, name := range Names() {
		pol, err := New(name, Options{Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		c := cluster(t, inventory.Node{Name: "cordoned", CPUMilli: 8000, MemoryMiB: 1 << 15},
			inventory.Node{Name: "down", CPUMilli: 8000, MemoryMiB: 1 << 15})
		c.Nodes[0].Closed, c.Nodes[1].Closed = ClosedCordoned, "node is not Ready"
		plain := cpuPod("plain", 100)
		if _, err := pol.Place(c, &plain); err == nil {
			t.Errorf("%s: a pod without the toleration was placed on closed nodes", name)
		}
		tolerant := cpuPod("tolerant", 100)
		tolerant.OpensCordoned = true
		if d, err := pol.Place(c, &tolerant); err != nil || d.Node != 0 {
			t.Errorf("%s: tolerant pod: node %d (err %v), want the cordoned node 0", name, d.Node, err)
		}
	}
}
