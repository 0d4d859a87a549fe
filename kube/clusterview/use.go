package clusterview

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/clusterinv"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/quantity"
)

// UseReader reads the nodes' GPUUse objects for a view without letting
// the read hang it: List (crdwatch.Watch.List) blocks on its informer's
// first sync, which never ends where RBAC refuses the list (a scheduler
// upgraded without the chart's role). One List runs at a time, shared by
// the views that wait for it; a view waits at most Wait and otherwise goes
// without use, saying why. It keeps no objects between reads.
type UseReader struct {
	List func() ([]*unstructured.Unstructured, error)
	Wait time.Duration

	mu     sync.Mutex
	flight *useFlight
}

type useFlight struct {
	done chan struct{}
	objs []*unstructured.Unstructured
	err  error
}

// Read returns List's objects, or an error when it takes over Wait.
func (r *UseReader) Read() ([]*unstructured.Unstructured, error) {
	r.mu.Lock()
	f := r.flight
	if f == nil {
		f = &useFlight{done: make(chan struct{})}
		r.flight = f
		go func() {
			f.objs, f.err = r.List()
			r.mu.Lock()
			r.flight = nil
			r.mu.Unlock()
			close(f.done)
		}()
	}
	r.mu.Unlock()
	t := time.NewTimer(r.Wait)
	defer t.Stop()
	select {
	case <-f.done:
		return f.objs, f.err
	case <-t.C:
		return nil, fmt.Errorf("listing the GPUUse objects took over %v (the scheduler's informer has not synced yet; it never does unless the scheduler's role grants list and watch on gpuuses.tessera.io, as the chart's does)", r.Wait)
	}
}

// ReadUse sets v.Use from the nodes' GPUUse objects as the scheduler's
// informer holds them (err: why they could not be read). An object that
// does not read is noted in v.UseErrors and its node's GPUs are shown not
// metered.
func (v *View) ReadUse(objs []*unstructured.Unstructured, err error) {
	v.Use, v.UseErrors = map[string]nodeuse.Status{}, nil
	if err != nil {
		v.UseErrors = append(v.UseErrors, fmt.Sprintf("the nodes' GPU use could not be read: %v", err))
	}
	for _, u := range objs {
		st, err := nodeuse.FromObject(u)
		if err != nil {
			v.UseErrors = append(v.UseErrors, fmt.Sprintf("%v; the node's GPUs are shown not metered", err))
			continue
		}
		v.Use[u.GetName()] = st
	}
}

// nodeUse is one node's use as the page shows it at a given time.
type nodeUse struct {
	// why says why the node's figures are not shown ("" when they are):
	// no GPUUse, or one older than clusterinv.StaleUse.
	why    string
	status nodeuse.Status
	gpus   map[string]gpuuse.GPU
	shares map[[2]string]gpuuse.Share
	// taken marks the records already put on a row: a pod with two
	// containers on one GPU has one record, shown once.
	taken map[[2]string]bool
}

// useOf is node's use at now from its GPUUse status (ok: it has one).
func useOf(node string, st nodeuse.Status, ok bool, now time.Time) nodeUse {
	nu := nodeUse{status: st, gpus: map[string]gpuuse.GPU{}, shares: map[[2]string]gpuuse.Share{}, taken: map[[2]string]bool{}}
	switch age := now.Sub(st.At); {
	case !ok:
		nu.why = "the node's agent publishes no use (no GPUUse " + node + ")"
		return nu
	case age > clusterinv.StaleUse:
		nu.why = fmt.Sprintf("the node's agent last published use %v ago", age.Round(time.Second))
		return nu
	}
	for _, g := range st.GPUs {
		nu.gpus[g.GPU] = g
		for _, sh := range g.Shares {
			nu.shares[[2]string{sh.Workload, g.GPU}] = sh
		}
	}
	return nu
}

// gpu is the use of the GPU with uuid.
func (nu nodeUse) gpu(uuid string) gpuuse.Use {
	if nu.why != "" {
		return gpuuse.NotMetered(nu.why)
	}
	g, ok := nu.gpus[uuid]
	if !ok {
		return gpuuse.NotMetered("the node's GPUUse does not list this GPU")
	}
	return g.Use
}

// share is the use and idle mark of workload's share of the GPU with
// uuid; again is set for the pod's second share of that GPU (another
// container's), whose use the first carries.
func (nu nodeUse) share(workload, uuid string) (use gpuuse.Use, idle *gpuuse.Idle, again bool) {
	k := [2]string{workload, uuid}
	again = nu.taken[k]
	nu.taken[k] = true
	sh, ok := nu.shares[k]
	switch {
	case nu.why != "":
		return gpuuse.NotMetered(nu.why), nil, again
	case again:
		return gpuuse.Use{Source: gpuuse.None, Reason: "counted in this pod's first share of this GPU"}, nil, true
	case !ok:
		return gpuuse.NotMetered(fmt.Sprintf("the node's GPUUse (published at %s UTC) does not list this pod on this GPU yet", nu.status.At.UTC().Format(time.TimeOnly))), nil, false
	}
	return sh.Use, sh.Idle, false
}

// useNotes say which nodes publish no current use, and how the others'
// figures are made.
func useNotes(v View, uses map[string]nodeUse) []string {
	var none, stale, rules []string
	for _, n := range v.Nodes {
		nu := uses[n.Name]
		switch {
		case len(n.GPUs) == 0:
		case strings.HasPrefix(nu.why, "the node's agent publishes no use"):
			none = append(none, n.Name)
		case nu.why != "":
			stale = append(stale, n.Name)
		default:
			r := nu.status.Rule
			rule := fmt.Sprintf("over %gs windows; a pod is an idle holder once its use stays below %s of a GPU for %v",
				r.WindowSeconds, quantity.FormatShare(r.IdleBelowMilli), time.Duration(r.IdleAfterSeconds*float64(time.Second)))
			if !slices.Contains(rules, rule) {
				rules = append(rules, rule)
			}
		}
	}
	var out []string
	if len(rules) > 0 {
		out = append(out, "Use is each GPU's busy fraction as the nodes' agents last published it (their GPUUse objects), measured or simulated as labelled, "+strings.Join(rules, "; on other nodes, ")+".")
	}
	switch {
	case len(none) > 0 && len(rules) == 0 && len(stale) == 0:
		out = append(out, "No node publishes GPU use (no GPUUse objects: run the agents with --use-period and install the GPUUse CRD), so the use columns say \"not metered\".")
	case len(none) > 0:
		out = append(out, fmt.Sprintf("%d node(s) publish no GPU use (no GPUUse object): their GPUs say \"not metered\" (%s).", len(none), listSome(none)))
	}
	if len(stale) > 0 {
		out = append(out, fmt.Sprintf("%d node(s) last published GPU use more than %v ago: their figures are stale and shown \"not metered\" (%s).", len(stale), clusterinv.StaleUse, listSome(stale)))
	}
	return append(out, v.UseErrors...)
}
