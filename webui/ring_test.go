package webui

import (
	"slices"
	"testing"
	"time"
)

func TestRing(t *testing.T) {
	r := NewRing[int](3)
	if r.Len() != 0 || r.Cap() != 3 || len(r.Items()) != 0 {
		t.Fatalf("new ring: len %d cap %d items %v", r.Len(), r.Cap(), r.Items())
	}
	if _, ok := r.Last(); ok {
		t.Error("Last of an empty ring: ok")
	}
	for i, want := range [][]int{{1}, {1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 7}} {
		r.Push(i + 1)
		if got := r.Items(); !slices.Equal(got, want) {
			t.Errorf("after pushing 1..%d: %v, want %v", i+1, got, want)
		}
		if last, ok := r.Last(); !ok || last != i+1 {
			t.Errorf("after pushing 1..%d: Last = %d, %v", i+1, last, ok)
		}
		if r.Len() != len(want) || r.At(0) != want[0] {
			t.Errorf("after pushing 1..%d: Len %d At(0) %d", i+1, r.Len(), r.At(0))
		}
	}
	// Items is a copy.
	items := r.Items()
	items[0] = 99
	if r.At(0) == 99 {
		t.Error("Items shares the ring's storage")
	}
	one := NewRing[string](0)
	one.Push("a")
	one.Push("b")
	if one.Cap() != 1 || !slices.Equal(one.Items(), []string{"b"}) {
		t.Errorf("capacity 0 ring: cap %d items %v; want one slot holding the newest", one.Cap(), one.Items())
	}
	defer func() {
		if recover() == nil {
			t.Error("At out of range did not panic")
		}
	}()
	r.At(3)
}

func TestHistory(t *testing.T) {
	h := NewHistory(10*time.Second, time.Minute) // 6 samples
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }
	if info := h.Info(); info.Len != 0 || info.Last != nil || info.IntervalSeconds != 10 || info.SpanSeconds != 60 {
		t.Errorf("empty history info %+v", info)
	}
	for i := range 8 {
		if !h.Record(Sample{Time: at(i), Running: i}) {
			t.Fatalf("sample %d refused", i)
		}
	}
	if h.Record(Sample{Time: at(7)}) || h.Record(Sample{Time: at(3)}) {
		t.Error("a sample not after the newest one was recorded")
	}
	running := func(ss []Sample) []int {
		var out []int
		for _, s := range ss {
			out = append(out, s.Running)
		}
		return out
	}
	if got := running(h.Since(time.Time{})); !slices.Equal(got, []int{2, 3, 4, 5, 6, 7}) {
		t.Errorf("all samples %v; want the last 6 (the span over the interval)", got)
	}
	if got := running(h.Since(at(5))); !slices.Equal(got, []int{6, 7}) {
		t.Errorf("since sample 5: %v, want [6 7]", got)
	}
	if got := running(h.Since(at(5).Add(time.Second))); !slices.Equal(got, []int{6, 7}) {
		t.Errorf("since just after sample 5: %v, want [6 7]", got)
	}
	if got := h.Since(at(7)); len(got) != 0 {
		t.Errorf("since the newest: %v, want none", got)
	}
	if info := h.Info(); info.Len != 6 || info.Last == nil || !info.Last.Equal(at(7)) {
		t.Errorf("info %+v", info)
	}
	if d := NewHistory(0, 0); d.Interval() != DefaultSampleInterval || d.ring.Cap() != int(DefaultHistorySpan/DefaultSampleInterval) {
		t.Errorf("defaults: interval %v, %d samples", d.Interval(), d.ring.Cap())
	}
}

func TestSortAndTrimWorkloads(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	s := Snapshot{Workloads: []Workload{
		{ID: "job-1", State: "succeeded", Submitted: t0, Seq: 1},
		{ID: "job-2", State: StateRunning, Submitted: t0.Add(time.Second), Seq: 2},
		{ID: "job-3", State: "failed", Submitted: t0.Add(2 * time.Second), Seq: 3},
		{ID: "job-4", State: StateQueued, Submitted: t0.Add(3 * time.Second), Seq: 4},
		{ID: "job-5", State: "stopped", Submitted: t0.Add(3 * time.Second), Seq: 5},
		{ID: "job-6", State: StateRunning, Submitted: t0.Add(3 * time.Second), Seq: 6},
	}}
	s.Trim(2)
	var ids []string
	for _, w := range s.Workloads {
		ids = append(ids, w.ID)
	}
	if want := []string{"job-6", "job-4", "job-2", "job-5", "job-3"}; !slices.Equal(ids, want) || s.WorkloadsOmitted != 1 {
		t.Errorf("trimmed order %v (omitted %d); want %v, 1 omitted: live first, newest first", ids, s.WorkloadsOmitted, want)
	}
}

func TestSummarize(t *testing.T) {
	m := int64(300)
	s := Snapshot{
		GPUs: []GPU{
			{Model: "H200", MemoryMiB: 1000, MemoryBookedMiB: 500, GuaranteedMilli: 500, LimitMilli: 800, MeasuredMilli: &m},
			{Model: "A100", MemoryMiB: 800, GuaranteedMilli: 0, LimitMilli: 0},
			{Model: "H200", MemoryMiB: 1000, MemoryBookedMiB: 1000, GuaranteedMilli: 1000, LimitMilli: 1000},
		},
		Pending:   []Pending{{ID: "job-3"}},
		Workloads: []Workload{{State: StateRunning}, {State: StateRunning}, {State: StateQueued}, {State: "failed"}},
	}
	s.Summarize()
	tt := s.Totals
	if tt.GPUs != 3 || tt.CapacityMilli != 3000 || tt.GuaranteedMilli != 1500 || tt.LimitMilli != 1800 || tt.MeasuredMilli == nil || *tt.MeasuredMilli != 300 ||
		tt.MemoryMiB != 2800 || tt.MemoryBookedMiB != 1500 || tt.Running != 2 || tt.Waiting != 1 || tt.Finished != 1 {
		t.Errorf("totals %+v", tt)
	}
	if len(s.Models) != 2 || s.Models[0].Model != "A100" || s.Models[0].MeasuredMilli != nil || s.Models[1].GPUs != 2 || s.Models[1].GuaranteedMilli != 1500 {
		t.Errorf("models %+v", s.Models)
	}
	sample := SampleOf(s)
	if sample.GuaranteedMilli != 1500 || !slices.Equal(sample.GPUs, []int64{500, 0, 1000}) || sample.MeasuredMilli == nil || *sample.MeasuredMilli != 300 {
		t.Errorf("sample %+v", sample)
	}
}
