package clusterview_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	agentkube "github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/metrics"
	"github.com/tessera-gpu/tessera/agent/setup"
	"github.com/tessera-gpu/tessera/agent/usepub"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

// simAgent is a node agent's use side on simulated GPUs as tessera agent
// assembles it (agent/setup): the node arbiter seating each container's
// shares, metered by the simulated meter from the loads the pods declare,
// the use records (setup.UseSource) published as the node's GPUUse by the
// pacing loop, and the agent's metrics collector; all on a clock the test
// steps, the arbiter once a second and the loop after each step, as their
// tickers would.
type simAgent struct {
	inv     inventory.Node
	entries []checkpoint.Entry
	clock   *clocktesting.FakeClock
	arb     *arbiter.Arbiter
	loop    *usepub.Loop
	reg     *prometheus.Registry
	last    nodeuse.Status // the last publication
}

// Inventory implements metrics.Node.
func (a *simAgent) Inventory() inventory.Node { return a.inv }

// Allocations implements metrics.Node.
func (a *simAgent) Allocations() []checkpoint.Entry { return a.entries }

// The agent's use window and idle rule: idle below 0.05 of a GPU for a minute.
const (
	agentWindow    = 10 * time.Second
	agentIdleAfter = time.Minute
)

// startSimAgent seats the containers of the bound pods on inv's node from
// their assignments, created at t0, the clock's start.
func startSimAgent(ctx context.Context, t *testing.T, c kubernetes.Interface, dyn dynamic.Interface, inv inventory.Node, pods []corev1.Pod, t0 time.Time) *simAgent {
	t.Helper()
	dir := t.TempDir() // before the arbiter, so it is removed after the arbiter closed
	log := slog.New(slog.DiscardHandler)
	a := &simAgent{inv: inv, clock: clocktesting.NewFakeClock(t0)}
	sim := setup.NewSimMeter(a.Allocations, agentkube.Pods{Client: c, Node: inv.Name}.EnvOf, a.clock.Now, log)
	capacity := map[string]uint64{}
	for _, g := range inv.GPUs {
		capacity[g.UUID] = uint64(g.MemoryMiB) << 20
	}
	var mono uint64
	arb, err := arbiter.New(arbiter.Config{Capacity: capacity, Clock: a.clock,
		Mono:   func() (uint64, error) { mono += uint64(time.Second); return mono, nil },
		Period: time.Second, StaleAfter: time.Hour, UseWindow: agentWindow,
		Idle:  gpuuse.IdleRule{BelowMilli: 50, After: agentIdleAfter},
		Meter: sim, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arb.Close(context.Background()) })
	a.arb = arb
	for _, p := range pods {
		if p.Spec.NodeName != inv.Name {
			continue
		}
		al, err := binding.Decode(p.Annotations[binding.AnnotationKey])
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		for _, ct := range al.Containers {
			e := checkpoint.Entry{Key: fmt.Sprintf("%s-%s", p.UID, ct.Name), Namespace: p.Namespace, Pod: p.Name, PodUID: string(p.UID),
				Container: ct.Name, GPUs: ct.GPUs, Created: t0}
			for _, sh := range ct.GPUs {
				e.DeviceIDs = append(e.DeviceIDs, sh.UUID)
			}
			seat := filepath.Join(dir, e.Key)
			if err := os.Mkdir(seat, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := (arbiter.Enforcer{Arbiter: arb}).Register(ctx, e.Key, seat, e.GPUs); err != nil {
				t.Fatal(err)
			}
			a.entries = append(a.entries, e)
		}
	}
	sim.Refresh(ctx)
	src := setup.UseSource{Node: a, Arbiter: arb, Sim: sim, Log: log}
	a.loop = &usepub.Loop{
		Records: func(now time.Time) nodeuse.Status {
			st := src.Records(ctx, now)
			a.last = st
			return st
		},
		Sink:  &agentkube.UsePublisher{Core: c, Dynamic: dyn, Node: inv.Name},
		Pacer: gpuuse.Pacer{Period: gpuuse.MinPublishPeriod},
		Log:   log,
	}
	a.reg = prometheus.NewPedanticRegistry()
	a.reg.MustRegister(metrics.NewCollector(a, metrics.Simulated{Node: a}, setup.ArbiterUsage{Arbiter: arb}, log))
	return a
}

// stepTo runs the arbiter once a second, and the publishing loop after each
// step, until the clock reads at; it returns the last published records.
func (a *simAgent) stepTo(ctx context.Context, t *testing.T, at time.Time) nodeuse.Status {
	t.Helper()
	var published nodeuse.Status
	for a.clock.Now().Before(at) {
		a.clock.Step(time.Second)
		if err := a.arb.Step(ctx); err != nil {
			t.Fatal(err)
		}
		why, err := a.loop.Step(ctx, a.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if why != "" {
			published = a.last
		}
	}
	return published
}

// busy is the agent's tessera_container_gpu_busy_ratio and
// tessera_container_gpu_idle by pod (namespace/name) on GPU uuid, as a
// scrape of its metrics reads them now.
func (a *simAgent) busy(t *testing.T) map[[2]string][2]float64 {
	t.Helper()
	families, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string][2]float64{}
	for _, f := range families {
		i := map[string]int{"tessera_container_gpu_busy_ratio": 0, "tessera_container_gpu_idle": 1}
		k, ok := i[f.GetName()]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			l := labels(m)
			key := [2]string{l["namespace"] + "/" + l["pod"], l["uuid"]}
			v := out[key]
			v[k] = m.GetGauge().GetValue()
			out[key] = v
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
