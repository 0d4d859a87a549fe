package hostd

import (
	"testing"

	"github.com/tessera-gpu/tessera/queueing"
)

// FuzzParseConfig feeds arbitrary files to the --config parser: it must
// never panic, refuse with a message, and what it accepts must be a valid
// queue tree (each queue named, weighted and bounded as the cluster's
// Queue allows) with a minimum runtime >= 0.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"queues:\n  - name: research\n    guaranteed: {gpu: 1, gpuMemory: 80Gi}\n    weight: 2\n  - name: batch\n    parent: research\n    priority: -5\n    limit: {gpu: \"0.5\"}\npreemption:\n  minRuntime: 90s\n",
		"preemption: {disabled: true}\n",
		"queues:\n  - name: a\n    guaranteed: {gpu: 2}\n    limit: {gpu: 1}\n",
		"queues:\n  - name: a\n    parent: a\n",
		"queues:\n  - name: a\n  - name: b\n    parent: a\n  - name: c\n    parent: b\n",
		"queues:\n  - name: a\n    weight: 2147483648\n    priority: -2147483649\n",
		"queues:\n  - name: a\n    guaranteed: {gpu: 1e400, memory: -1, cpu: 0.0001}\n",
		"queues: {name: a}\n",
		"preemption:\n  minRuntime: -1m\n",
		"a: &a [*a, *a]\n",
		"{\"queues\": [{\"name\": \"x\", \"limit\": {\"gpuMemory\": \"1Ei\"}}]}",
		"", "~", "- 1\n", "queues:\n  - 1\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseConfig(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseConfig(%q): an error without a message", data)
			}
			return
		}
		if s.MinRuntime != nil && *s.MinRuntime < 0 {
			t.Fatalf("ParseConfig(%q): minimum runtime %v", data, *s.MinRuntime)
		}
		if _, err := queueing.NewTree(s.Queues); err != nil {
			t.Fatalf("ParseConfig(%q) accepted queues that are no tree: %v", data, err)
		}
		for _, q := range s.Queues {
			if !queueing.ValidName(q.Name) || q.Weight < 0 || !q.Guaranteed.Fits(q.Limit) {
				t.Fatalf("ParseConfig(%q) accepted queue %+v", data, q)
			}
		}
	})
}
