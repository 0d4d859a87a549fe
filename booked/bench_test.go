package booked

import (
	"fmt"
	"testing"

	"github.com/tessera-gpu/tessera/binding"
)

// BenchmarkChangeThenRead times what a scheduling cycle pays at 5,000
// nodes of 8 GPUs with 50,000 workloads booked when one workload came and
// one went since the last cycle: the two events, then the running
// workloads and the usage by queue it reads.
func BenchmarkChangeThenRead(b *testing.B) {
	c := New()
	for i := range 5000 {
		if err := c.SetNode(inv(fmt.Sprintf("n%04d", i), 8, 64000), ""); err != nil {
			b.Fatal(err)
		}
	}
	hold := func(i int) Hold {
		node := fmt.Sprintf("n%04d", i%5000)
		return Hold{ID: fmt.Sprintf("w%d", i), Node: node, Key: "k", CPUMilli: 100, Queue: fmt.Sprintf("q%d", i%4),
			Groups: [][]binding.Share{{share(node, (i/5000)%8, 100)}}}
	}
	for i := range 50000 {
		if err := c.Book(hold(i)); err != nil {
			b.Fatal(err)
		}
	}
	next := 50000
	for b.Loop() {
		c.Release(fmt.Sprintf("w%d", next-50000))
		_ = c.Book(hold(next))
		next++
		if len(c.Running()) != 50000 || len(c.Usage()) != 4 {
			b.Fatal("wrong reads")
		}
	}
}
