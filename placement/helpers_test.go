package placement

import (
	"testing"

	"github.com/tessera-gpu/tessera/request"
)

func sharePod(name string, cpu, milli int64) Pod {
	return Pod{Name: name, CPUMilli: cpu, GPU: request.GPU{Count: 1, ComputeMilli: milli, ComputeLimitMilli: milli}}
}

func wholePod(name string, cpu int64, count int, models ...string) Pod {
	return Pod{Name: name, CPUMilli: cpu, GPU: request.GPU{Count: count, ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, Models: models}}
}

func cpuPod(name string, cpu int64) Pod { return Pod{Name: name, CPUMilli: cpu} }

// place asks p where pod goes and applies it, failing the test on error.
func place(t *testing.T, c *Cluster, pol Policy, pod Pod) Decision {
	t.Helper()
	d, err := pol.Place(c, &pod)
	if err != nil {
		t.Fatalf("%s: place %s: %v", pol.Name(), pod.Name, err)
	}
	if err := c.Apply(&pod, d); err != nil {
		t.Fatalf("%s: apply %s: %v", pol.Name(), pod.Name, err)
	}
	return d
}

func dist(shapes ...Typical) Distribution { return Distribution(shapes) }
