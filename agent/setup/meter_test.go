package setup

import (
	"testing"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/arbiter/nvmlmeter"
)

func TestPodLookup(t *testing.T) {
	entries := []checkpoint.Entry{
		{Key: "tsr-one", PodUID: "pod-1", Container: "main"},
		{Key: "tsr-two-a", PodUID: "pod-2", Container: "a"},
		{Key: "tsr-two-b", PodUID: "pod-2", Container: "b"},
	}
	lookup := podLookup(func() []checkpoint.Entry { return entries })
	cases := []struct {
		pod, key string
	}{
		{"pod-1", "tsr-one"},
		{"pod-2", ""}, // two GPU containers: the cgroup cannot tell which
		{"pod-3", ""}, // no allocation
	}
	for _, c := range cases {
		key, ok := lookup(nvmlmeter.Container{PodUID: c.pod, ID: "4a5b6c7d8e9f"})
		if key != c.key || ok != (c.key != "") {
			t.Errorf("pod %s: got %q %v, want %q", c.pod, key, ok, c.key)
		}
	}
	// Allocations are read on every lookup, so later ones are found.
	entries = append(entries, checkpoint.Entry{Key: "tsr-three", PodUID: "pod-3"})
	if key, ok := lookup(nvmlmeter.Container{PodUID: "pod-3"}); key != "tsr-three" || !ok {
		t.Errorf("a later allocation: got %q %v", key, ok)
	}
	if _, ok := podLookup(func() []checkpoint.Entry { return nil })(nvmlmeter.Container{PodUID: "pod-1"}); ok {
		t.Error("no allocations resolved a pod")
	}
}
