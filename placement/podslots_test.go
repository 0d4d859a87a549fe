package placement

import (
	"errors"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
)

// A node allowing 3 pods takes 3 parts that take a slot, whatever their
// kind (CPU-only, sharing, whole GPU, MIG), and rejects the fourth with
// the pod count; parts that take no slot still fit; a release gives a
// slot back. FromInventory reads the limit.
func TestPodSlots(t *testing.T) {
	inv := plainInv("a", "A100-40GB", 2)
	inv.Pods = 3
	inv.GPUs[1].MIGMode, inv.GPUs[1].MIGManaged = inventory.MIGEnabled, true
	c, err := FromInventory([]inventory.Node{inv})
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Nodes[0]; n.Pods != 3 || n.FreePods != 3 {
		t.Fatalf("FromInventory: pods %d, free %d; want 3, 3", n.Pods, n.FreePods)
	}
	pol, _ := New("binpack", Options{Seed: 1})
	slot := func(p Pod) Pod { p.Slot = true; return p }
	var placed []Pod
	var decs []Decision
	for _, p := range []Pod{slot(cpuPod("cpu", 100)), slot(sharePod("share", 100, 250)), slot(migPod("mig", "1g.5gb", 1))} {
		d := place(t, c, pol, p)
		placed, decs = append(placed, p), append(decs, d)
	}
	if n := c.Nodes[0]; n.FreePods != 0 {
		t.Fatalf("after 3 pods: %d slots free, want 0", n.FreePods)
	}
	fourth := slot(sharePod("fourth", 100, 250))
	r, ok := Explain(&c.Nodes[0], &fourth)
	if ok || r.Unit != UnitPods || r.Reason != "node pod limit 3 reached" {
		t.Fatalf("Explain = %+v, %v; want UnitPods, %q", r, ok, "node pod limit 3 reached")
	}
	_, err = pol.Place(c, &fourth)
	var nf *NoFitError
	if !errors.As(err, &nf) || nf.First.Unit != UnitPods {
		t.Fatalf("Place = %v, want a NoFitError on the pod count", err)
	}
	mig := slot(migPod("mig2", "1g.5gb", 1))
	if _, err := pol.Place(c, &mig); !errors.Is(err, ErrNoFit) {
		t.Fatalf("MIG pod on a full node: %v, want no fit", err)
	}
	if err := c.Apply(&fourth, Decision{Node: 0, GPUs: []int{0}}); err == nil || !strings.Contains(err.Error(), "no pod slot free (pod limit 3)") {
		t.Fatalf("Apply over the limit: %v", err)
	}
	part := sharePod("part", 0, 250) // a pod's further part: no slot
	place(t, c, pol, part)
	if err := c.Release(&placed[0], decs[0]); err != nil {
		t.Fatal(err)
	}
	if n := c.Nodes[0]; n.FreePods != 1 {
		t.Fatalf("after a release: %d slots free, want 1", n.FreePods)
	}
	place(t, c, pol, fourth)
	if err := c.Release(&fourth, Decision{Node: 0, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(placed); i++ {
		if err := c.Release(&placed[i], decs[i]); err != nil {
			t.Fatal(err)
		}
	}
	over := slot(cpuPod("never", 0)) // every slot free: nothing to give back
	if err := c.Release(&over, Decision{Node: 0}); err == nil || !strings.Contains(err.Error(), "more pod slots free than its limit 3") {
		t.Fatalf("Release past the limit: %v", err)
	}
}

// A node without a pod limit (0) never counts slots, as a node with
// untracked CPU never counts CPU.
func TestNoPodLimit(t *testing.T) {
	c := &Cluster{Nodes: []Node{NewNode("a", 0, 0, 1, "T4", 0)}}
	pol, _ := New("binpack", Options{Seed: 1})
	for range 50 {
		p := cpuPod("p", 0)
		p.Slot = true
		place(t, c, pol, p)
	}
	if n := c.Nodes[0]; n.Pods != 0 || n.FreePods != 0 {
		t.Fatalf("pods %d, free %d; want both 0", n.Pods, n.FreePods)
	}
}
