package clusterview

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestQueueUseMetric: tessera_scheduler_queue_gpu_busy is each queue's
// published use as the dashboard sums it (TestTranslateUse's view: research
// 0.42 measured and 0.25 simulated, apart; default 0.01 measured); no
// series for a queue none of whose pods is metered, none before the first
// cycle.
func TestQueueUseMetric(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	now := func() time.Time { return at.Add(5 * time.Second) }
	gather := func(v fakeViewer) map[[2]string]float64 {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(QueueUse{Source: Source{Viewer: v, Now: now}})
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[[2]string]float64{}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				out[[2]string{l["queue"], l["source"]}] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	want := map[[2]string]float64{{"research", "measured"}: 0.42, {"research", "simulated"}: 0.25, {"default", "measured"}: 0.01}
	if got := gather(fakeViewer{v: useView(t, published(at, true)), ok: true}); !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
	if got := gather(fakeViewer{}); len(got) != 0 {
		t.Errorf("before the first cycle: %v, want none", got)
	}
}
