package nodeinventory

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
)

// countingSource counts the nodes it is asked for.
type countingSource struct {
	src   Source
	calls int
}

func (c *countingSource) Node(n *corev1.Node) (inventory.Node, error) {
	c.calls++
	return c.src.Node(n)
}

// TestNodeCache: an unchanged node is read once, a new resourceVersion or
// UID is read again, errors are kept per version, and entries of nodes no
// longer asked for go.
func TestNodeCache(t *testing.T) {
	src := &countingSource{src: Labels{Catalog: catalog.Default()}}
	c := NewCache(src)
	node := func(uid, rv, count string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: types.UID("u-" + uid), ResourceVersion: rv,
			Labels: map[string]string{LabelModel: "H100", LabelCount: count}}}
	}
	first, err := c.Node(node("1", "10", "8"))
	if err != nil || len(first.GPUs) != 8 {
		t.Fatalf("first read: %d GPUs, %v; want 8", len(first.GPUs), err)
	}
	again, _ := c.Node(node("1", "10", "8"))
	if src.calls != 1 {
		t.Errorf("same version read %d times from the source, want once", src.calls)
	}
	if len(again.GPUs) != 8 || again.GPUs[7].UUID != "n/gpu7" {
		t.Errorf("cached read: %+v, want the 8 GPUs of the first", again.GPUs)
	}
	if got, _ := c.Node(node("1", "11", "4")); src.calls != 2 || len(got.GPUs) != 4 {
		t.Errorf("new resourceVersion: %d source calls, %d GPUs; want 2 and 4", src.calls, len(got.GPUs))
	}
	if got, _ := c.Node(node("2", "11", "2")); src.calls != 3 || len(got.GPUs) != 2 {
		t.Errorf("new UID (node recreated): %d source calls, %d GPUs; want 3 and 2", src.calls, len(got.GPUs))
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Node(node("2", "12", "lots")); err == nil {
			t.Error("a bad label read without error")
		}
	}
	if src.calls != 4 {
		t.Errorf("an erroring version read %d times in all, want 4", src.calls)
	}

	// Idle entries go at the next sweep.
	c.mu.Lock()
	e := c.entries["n"]
	e.used = time.Now().Add(-2 * idle)
	c.entries["n"] = e
	c.swept = time.Time{}
	c.mu.Unlock()
	other := node("3", "1", "1")
	other.Name = "m"
	if _, err := c.Node(other); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	_, kept := c.entries["n"]
	c.mu.Unlock()
	if kept {
		t.Error("the entry of a node not asked for in two idle periods was kept")
	}
}
