package placement

import (
	"reflect"
	"testing"

	"github.com/tessera-gpu/tessera/request"
)

// TestSamePodReadsEveryField changes each field of a pod (and of its GPU
// request) in turn: samePod must tell every change but the name, so a
// field added to request.GPU that samePod does not compare fails here
// (a remembered score would otherwise be taken for another pod).
func TestSamePodReadsEveryField(t *testing.T) {
	base := Pod{Name: "a", CPUMilli: 1000, MemoryMiB: 2048, GPU: request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 500,
		MemoryMiB: 100, MemoryLimitMiB: 200, MemoryShareMilli: 0, Models: []string{"H200"}}}
	if !samePod(&base, &base) {
		t.Fatal("a pod differs from itself")
	}
	named := base
	named.Name = "b"
	if !samePod(&base, &named) {
		t.Error("the name counts")
	}
	change := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 7)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Func: // Pod.Prefer: any preference tells the pods apart
			v.Set(reflect.ValueOf(func(*Cluster) ([]int64, error) { return nil, nil }))
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.ValueOf("A100-80GB")))
		default:
			t.Fatalf("field kind %s: teach this test (and samePod) about it", v.Kind())
		}
	}
	pt := reflect.TypeOf(base)
	for i := range pt.NumField() {
		f := pt.Field(i)
		if f.Name == "Name" || f.Name == "GPU" {
			continue
		}
		p := base
		change(reflect.ValueOf(&p).Elem().Field(i))
		if samePod(&base, &p) {
			t.Errorf("samePod does not read Pod.%s", f.Name)
		}
	}
	gt := reflect.TypeOf(base.GPU)
	for i := range gt.NumField() {
		p := base
		p.GPU.Models = append([]string(nil), base.GPU.Models...)
		change(reflect.ValueOf(&p.GPU).Elem().Field(i))
		if samePod(&base, &p) {
			t.Errorf("samePod does not read GPU.%s", gt.Field(i).Name)
		}
	}
}

// TestMemoSlots: a shape's scores are found again under the same epoch,
// a new epoch or pod gets an emptied slot, and the least recently used of
// the slots is the one forgotten.
func TestMemoSlots(t *testing.T) {
	var m classMemo
	a := Pod{Name: "a", GPU: request.GPU{Count: 1, ComputeMilli: 500}}
	b := Pod{Name: "b", GPU: request.GPU{Count: 1, ComputeMilli: 1000}}
	s := m.slot(&a, 1, 3)
	s.ver[2], s.score[2], s.fits[2] = 9, 42, true
	if again := m.slot(&Pod{Name: "other", GPU: a.GPU}, 1, 5); again != s || again.ver[2] != 9 || len(again.ver) != 5 {
		t.Fatal("the same shape under the same epoch lost its scores")
	}
	if other := m.slot(&a, 2, 5); other == s || other.ver[2] != 0 {
		t.Fatal("another epoch reads the first one's scores")
	}
	m.slot(&b, 1, 5)
	m.slot(&Pod{GPU: request.GPU{Count: 2, ComputeMilli: 1000}}, 1, 5)
	// a (epoch 1) was used before a (epoch 2), b and the 2-GPU pod, and
	// is the one a fifth shape takes the place of.
	m.slot(&Pod{GPU: request.GPU{Count: 4, ComputeMilli: 1000}}, 1, 5)
	if found := m.slot(&a, 1, 5); found.ver[2] != 0 {
		t.Error("the least recently used shape was kept")
	}
}
