package hostd

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/queueing"
)

func TestQueueTree(t *testing.T) {
	tree := queueTree([]queueing.Queue{{Name: "owner", Guaranteed: queueing.Resources{GPUMilli: 1000}}}, []string{"owner", "adhoc", "adhoc"})
	if got := strings.Join(tree.Names(), ","); got != "adhoc,default,owner" {
		t.Errorf("names = %s", got)
	}
	if q, _ := tree.Queue("owner"); q.Guaranteed.GPUMilli != 1000 {
		t.Errorf("configured guarantee lost: %+v", q)
	}
	if q, _ := tree.Queue("adhoc"); q.Weight != 1 || !q.Guaranteed.IsZero() {
		t.Errorf("queue created on use: %+v", q)
	}
	// A name the tree rejects (an older record's underscore) is left out.
	odd := queueTree(nil, []string{"my_queue", "ok"})
	if got := strings.Join(odd.Names(), ","); got != "default,ok" {
		t.Errorf("names = %s", got)
	}
	// An inconsistent configured set falls back to flat queues.
	flat := queueTree([]queueing.Queue{{Name: "a", Parent: "nope"}}, []string{"b"})
	if got := strings.Join(flat.Names(), ","); got != "a,b,default" {
		t.Errorf("fallback names = %s", got)
	}
}
