package queueing

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSpecQueue(t *testing.T) {
	var specs []Spec
	in := `[{"name":"team","parent":"org","priority":5,"weight":2,
		"guaranteed":{"gpu":4,"gpuMemory":"320Gi","cpu":"64","memory":"512Gi"},
		"limit":{"gpu":"8000m"},"idleReclaimAfter":"2h"}]`
	if err := json.Unmarshal([]byte(in), &specs); err != nil {
		t.Fatal(err)
	}
	q, err := specs[0].Queue("queues[0]")
	if err != nil {
		t.Fatal(err)
	}
	want := Queue{Name: "team", Parent: "org", Priority: 5, Weight: 2,
		Guaranteed: Resources{GPUMilli: 4000, GPUMemoryMiB: 320 * 1024, CPUMilli: 64000, MemoryMiB: 512 * 1024},
		Limit:      Resources{GPUMilli: 8000}, IdleReclaimAfter: 2 * time.Hour}
	if q != want {
		t.Fatalf("Queue = %+v\nwant %+v", q, want)
	}
}

func TestSpecErrors(t *testing.T) {
	tests := []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "Bad_Name"}, `queues[3].name: must be a lowercase DNS label`},
		{Spec{Name: "a", Weight: -1}, "queues[3].weight: must be in [0, 2147483647] (0 means 1), got -1"},
		{Spec{Name: "a", Priority: 1 << 40}, "queues[3].priority: must be in [-2147483648, 2147483647]"},
		{Spec{Name: "a", Guaranteed: Amounts{GPU: "lots"}}, `queues[3].guaranteed.gpu: must be a number of GPUs such as 4 or 0.5, got "lots"`},
		{Spec{Name: "a", Guaranteed: Amounts{GPU: "-1"}}, `queues[3].guaranteed.gpu: must be a number of GPUs`},
		{Spec{Name: "a", Limit: Amounts{Memory: "1TB"}}, `queues[3].limit.memory: must be a size such as 512Gi, got "1TB"`},
		{Spec{Name: "a", Guaranteed: Amounts{GPU: "2"}, Limit: Amounts{GPU: "1"}}, "queues[3].guaranteed: must be within queues[3].limit"},
		{Spec{Name: "a", IdleReclaimAfter: "soon"}, `queues[3].idleReclaimAfter: must be a duration such as 2h or 90m, 0 (off) or in [30m, 168h], got "soon"`},
		{Spec{Name: "a", IdleReclaimAfter: "10m"}, "queues[3].idleReclaimAfter: must be 0 (off) or in [30m, 168h], got 10m0s"},
		{Spec{Name: "a", IdleReclaimAfter: "169h"}, "queues[3].idleReclaimAfter: must be 0 (off) or in [30m, 168h], got 169h0m0s"},
		{Spec{Name: "a", IdleReclaimAfter: "-1h"}, "queues[3].idleReclaimAfter: must be 0 (off) or in [30m, 168h], got -1h0m0s"},
	}
	for _, tc := range tests {
		if _, err := tc.spec.Queue("queues[3]"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Queue(%+v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// The range's ends and 0 are accepted; 0 is off.
func TestSpecIdleReclaimAfterRange(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "0": 0, "30m": 30 * time.Minute, "168h": 168 * time.Hour, "2h30m": 150 * time.Minute} {
		q, err := Spec{Name: "a", IdleReclaimAfter: in}.Queue("queues[0]")
		if err != nil || q.IdleReclaimAfter != want {
			t.Errorf("idleReclaimAfter %q: got %v, %v; want %v", in, q.IdleReclaimAfter, err, want)
		}
	}
}

func TestFromSpecs(t *testing.T) {
	qs, tree, err := FromSpecs([]Spec{{Name: "org", Guaranteed: Amounts{GPU: "2"}}, {Name: "team", Parent: "org", Weight: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[0].Guaranteed.GPUMilli != 2000 || qs[1].Weight != 3 {
		t.Errorf("queues = %+v", qs)
	}
	if got := tree.Ancestry("team"); len(got) != 2 || got[1] != "org" {
		t.Errorf("ancestry = %v", got)
	}
	for _, tc := range []struct {
		specs []Spec
		want  string
	}{
		{[]Spec{{Name: "a"}, {Name: "a"}}, `queues[1].name: "a" is defined twice`},
		{[]Spec{{Name: "a", Parent: "nope"}}, `queue a: parent "nope" is not defined`},
		{[]Spec{{Name: "ok"}, {Name: "x", Weight: -2}}, "queues[1].weight"},
	} {
		if _, _, err := FromSpecs(tc.specs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSpecs = %v, want %q", err, tc.want)
		}
	}
	var a Amount
	if err := json.Unmarshal([]byte(`{"x":1}`), &a); err == nil {
		t.Error("an object parsed as an amount")
	}
}
