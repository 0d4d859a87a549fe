package clusterinv

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

func useObject(t *testing.T, node string, at time.Time, busy map[string]int64) runtime.Object {
	t.Helper()
	st := nodeuse.Status{Source: "sim", At: at}
	for uuid, b := range busy {
		b := b
		st.GPUs = append(st.GPUs, gpuuse.GPU{GPU: uuid, Use: gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: &b}})
	}
	u, err := nodeuse.Object(node, st)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Each GPU's use is its node's GPUUse figure while fresh; a node without
// one, a stale one, or a GPU it does not list is not metered and says why.
func TestReadUse(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	r, _, _ := reader([]runtime.Object{node("a", nil), node("b", nil), node("c", nil)},
		gpuNodeObject("a", 2), gpuNodeObject("b", 1), gpuNodeObject("c", 1),
		useObject(t, "a", now.Add(-20*time.Second), map[string]int64{"a-gpu0": 600}),
		useObject(t, "b", now.Add(-StaleUse-time.Minute), map[string]int64{"b-gpu0": 300}))
	r.Now = func() time.Time { return now }
	inv, err := r.Read(context.Background())
	if err != nil || inv.UseError != nil {
		t.Fatal(err, inv.UseError)
	}
	for uuid, want := range map[string]string{
		"a-gpu0": "simulated",
		"a-gpu1": "not metered: the node's GPUUse does not list this GPU",
		"b-gpu0": "not metered: the node's agent last published use 3m0s ago",
		"c-gpu0": "not metered: the node's agent publishes no use (no GPUUse c)",
	} {
		u, ok := inv.Use[uuid]
		got := string(u.Source)
		if u.Source == gpuuse.None {
			got = u.Reason
		}
		if !ok || got != want {
			t.Errorf("%s: use %+v, want %s", uuid, u, want)
		}
	}
	if u := inv.Use["a-gpu0"]; u.BusyMilli == nil || *u.BusyMilli != 600 {
		t.Errorf("a-gpu0 busy %v, want 600", u.BusyMilli)
	}
}

// Without the GPUUse resource (or the right to list it) the inventory is
// read all the same and UseError says why.
func TestReadUseUnavailable(t *testing.T) {
	gr := schema.GroupResource{Group: "tessera.io", Resource: "gpuuses"}
	for _, c := range []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"no CRD", apierrors.NewNotFound(gr, ""), "install Tessera's CRDs", ErrNoGPUUse},
		{"RBAC", apierrors.NewForbidden(gr, "", errors.New("no")), "RBAC denied: cannot list gpuuses.tessera.io", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _, dyn := reader([]runtime.Object{node("a", nil)}, gpuNodeObject("a", 1))
			dyn.PrependReactor("list", "gpuuses", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, c.err })
			inv, err := r.Read(context.Background())
			if err != nil || len(inv.Nodes) != 1 {
				t.Fatalf("Read = %v, %d nodes; want the inventory", err, len(inv.Nodes))
			}
			if inv.Use != nil || inv.UseError == nil || !strings.Contains(inv.UseError.Error(), c.want) || (c.is != nil && !errors.Is(inv.UseError, c.is)) {
				t.Errorf("use %v, error %v; want none and %q", inv.Use, inv.UseError, c.want)
			}
		})
	}
}

// IdleSince: a pod is an idle holder when every share it has is marked
// idle, since the latest mark; a node's GPUUse older than StaleUse marks
// nothing; an object that does not read is left out with its error.
func TestIdleSince(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	idle := func(pod string, since time.Time) gpuuse.Share {
		return gpuuse.Share{Workload: pod, Use: gpuuse.Use{Source: gpuuse.Simulated}, Idle: &gpuuse.Idle{Since: since}}
	}
	busy := func(pod string) gpuuse.Share {
		return gpuuse.Share{Workload: pod, Use: gpuuse.Use{Source: gpuuse.Simulated}}
	}
	obj := func(node string, at time.Time, gpus ...[]gpuuse.Share) *unstructured.Unstructured {
		st := nodeuse.Status{Source: "sim", At: at}
		for i, shares := range gpus {
			st.GPUs = append(st.GPUs, gpuuse.GPU{GPU: node + "-gpu" + string(rune('0'+i)), Index: i, Use: gpuuse.Use{Source: gpuuse.Simulated}, Shares: shares})
		}
		u, err := nodeuse.Object(node, st)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	h1, h2 := now.Add(-2*time.Hour), now.Add(-time.Hour)
	bad := obj("bad", now, []gpuuse.Share{idle("ns/on-bad", h1)})
	bad.Object["status"].(map[string]any)["gpus"].([]any)[0].(map[string]any)["use"].(map[string]any)["source"] = "guessed"
	objs := []*unstructured.Unstructured{
		obj("a", now.Add(-time.Minute),
			[]gpuuse.Share{idle("ns/two-gpus", h1), idle("ns/half-busy", h1), idle("ns/one", h2)},
			[]gpuuse.Share{idle("ns/two-gpus", h2), busy("ns/half-busy")}),
		obj("stale", now.Add(-StaleUse-time.Second), []gpuuse.Share{idle("ns/on-stale", h1)}),
		obj("edge", now.Add(-StaleUse), []gpuuse.Share{idle("ns/on-edge", h1)}),
		bad,
	}
	got, errs := IdleSince(objs, now)
	want := map[string]time.Time{"ns/two-gpus": h2, "ns/one": h2, "ns/on-edge": h1}
	if !maps.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("idle pods %v, want %v", got, want)
	}
	if len(errs) != 1 {
		t.Errorf("errors %v, want the bad object's", errs)
	}
}
