package queueing

import (
	"strings"
	"testing"
)

func TestServeTakesTurnsAndStops(t *testing.T) {
	tree, err := NewTree([]Queue{{Name: "a"}, {Name: "b", Weight: 2}})
	if err != nil {
		t.Fatal(err)
	}
	l := tree.NewLedger(gpus(10), nil)
	var got []string
	Serve(l, map[string][]string{"a": {"a0", "a1", "a2"}, "b": {"b0", "b1", "b2"}}, func(q, item string) (Resources, bool) {
		got = append(got, item)
		return gpus(1), false
	})
	// b has twice a's weight: after a0 it gets two turns for a's one.
	if s := strings.Join(got, ","); s != "a0,b0,b1,a1,b2,a2" {
		t.Fatalf("order = %s", s)
	}
	got = nil
	Serve(tree.NewLedger(gpus(10), nil), map[string][]string{"a": {"x", "y"}}, func(q, item string) (Resources, bool) {
		got = append(got, item)
		return Resources{}, true
	})
	if len(got) != 1 {
		t.Fatalf("stop ignored: %v", got)
	}
}
