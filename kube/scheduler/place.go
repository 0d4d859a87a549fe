package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

type outcome int

const (
	outcomeBound outcome = iota
	outcomeInvalid
	outcomeUnschedulable
	outcomeError
)

// scheduleOne places, records and binds one pending pod, updating snap.
// fair, when set, allows reclaim from queues above their guarantee; key is
// what a failure backs off (the pod's, or its gang's).
func (s *Scheduler) scheduleOne(ctx context.Context, snap *snapshot, pod *corev1.Pod, fair *fairness, key string) outcome {
	pl, o, msg := s.planRespecting(snap, pod)
	if o == outcomeUnschedulable {
		s.maybeReserve(snap, pod)
	} else {
		s.unblock(pod)
	}
	if o == outcomeUnschedulable && !s.cfg.DisablePreemption {
		if note := s.preempt(ctx, snap, pod, fair); note != "" {
			msg += "; " + note
		}
	}
	if o != outcomeBound {
		s.reject(ctx, key, pod, reasonFor(o), msg)
		return o
	}
	return s.commit(ctx, snap, pod, pl, key)
}

// plan decides where a pod goes without changing snap or the API. On
// success the outcome is outcomeBound (to be done by commit); otherwise it
// is the reason the pod stays pending, with a message naming the cause.
func (s *Scheduler) plan(snap *snapshot, pod *corev1.Pod) (plan, outcome, string) {
	return s.planExcept(snap, pod, nil, "")
}

// planExcept is plan with the except nodes (by name) ruled out as reserved
// for what.
func (s *Scheduler) planExcept(snap *snapshot, pod *corev1.Pod, except map[string]bool, what string) (plan, outcome, string) {
	reqs, err := workload.FromPod(pod, s.cfg.Catalog)
	if err != nil {
		return plan{}, outcomeInvalid, err.Error()
	}
	pol, err := s.policyFor(pod)
	if err != nil {
		return plan{}, outcomeInvalid, err.Error()
	}
	view, viewNodes, why := s.eligibleView(snap, pod, reqs, except, what)
	cpu, mem := podHostRequests(pod)
	a, decisions, err := s.decide(pol, view, viewNodes, snap, pod, reqs, cpu, mem)
	if err != nil {
		msg := err.Error()
		if len(why) > 0 {
			msg += "; ruled out: " + summarize(why)
		}
		return plan{}, outcomeUnschedulable, msg
	}
	for i := range decisions {
		decisions[i].dec.Node = snap.byName[a.Node]
	}
	pl := plan{assignment: a, placed: decisions}
	if len(a.Containers) > 0 {
		// Encoded here, not at bind time, so that a record that cannot be
		// written fails the plan (and a gang's plan) before anything binds.
		if pl.encoded, err = binding.Encode(a); err != nil {
			return plan{}, outcomeError, fmt.Sprintf("annotation %s: %v", binding.AnnotationKey, err)
		}
	}
	return pl, outcomeBound, ""
}

// plan is a decision for one pod: its assignment and the engine bookings
// (nodes indexed in the snapshot).
type plan struct {
	assignment binding.Assignment
	// encoded is the assignment annotation; "" for a pod granted no GPU,
	// which carries none (it asks nothing of the node agent).
	encoded string
	placed  []placed
}

// book applies a plan's bookings to snap.
func (s *Scheduler) book(snap *snapshot, pod *corev1.Pod, pl plan) {
	exact := true
	for _, d := range pl.placed {
		if err := snap.cluster.Apply(&d.pod, d.dec); err != nil {
			exact = false
			s.cfg.Log.Error("booking a fresh decision failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	}
	if len(pl.placed) > 0 {
		ni := pl.placed[0].dec.Node
		snap.record(ni, booking{pod: pod, parts: pl.placed, exact: exact})
	}
}

// commit books a planned pod on snap, assumes it (so later cycles count it
// until the informer shows it bound) and hands its binding to the binder.
// A binding that fails un-assumes the pod, reports why on it and backs off
// key, after which the pod is scheduled again, unless the pod turns out
// bound after all (settleFailedBind).
func (s *Scheduler) commit(ctx context.Context, snap *snapshot, pod *corev1.Pod, pl plan, key string) outcome {
	a := pl.assignment
	bound := pod.DeepCopy()
	bound.Spec.NodeName = a.Node
	if pl.encoded != "" {
		if bound.Annotations == nil {
			bound.Annotations = map[string]string{}
		}
		bound.Annotations[binding.AnnotationKey] = pl.encoded
	}
	s.book(snap, bound, pl)
	s.assume(bound)
	job := func(ctx context.Context) {
		if err := s.bind(ctx, pod, a.Node, pl.encoded); err != nil {
			if s.settleFailedBind(ctx, pod, err) {
				s.backoff.forget(key)
				return
			}
			s.bindFailed(ctx, key, pod, err)
			return
		}
		s.metrics.bindOK.Inc()
		s.backoff.forget(key)
		s.events.bound(ctx, pod, a.Node, a)
	}
	if s.binder == nil {
		job(ctx)
	} else {
		s.binder.submit(job)
	}
	return outcomeBound
}

// bindFailed returns a pod whose binding failed to the queue: it is backed
// off (before it is un-assumed, so no cycle in between retries it at once)
// and, unless it is gone or was bound by someone else, gets a
// PodScheduled=False condition and an event saying why.
func (s *Scheduler) bindFailed(ctx context.Context, key string, pod *corev1.Pod, err error) {
	s.metrics.bindFail.Inc()
	retry := s.backoff.failed(key, failedWithError, time.Now())
	s.forget(pod.UID)
	defer s.poke()
	if ctx.Err() != nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Shutting down, deleted, or bound meanwhile: nothing to report on it.
		s.cfg.Log.Debug("binding failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	s.cfg.Log.Warn("binding failed; the pod stays pending", "pod", pod.Namespace+"/"+pod.Name, "retryIn", retry, "err", err)
	s.events.reject(ctx, pod, reasonSchedulerError, err.Error())
}

func reasonFor(o outcome) string {
	switch o {
	case outcomeInvalid:
		return reasonInvalid
	case outcomeError:
		return reasonSchedulerError
	}
	return reasonUnschedulable
}

type placed struct {
	pod placement.Pod
	dec placement.Decision
}

// eligibleView returns the snapshot restricted to the nodes the pod's
// constraints and the nodes' sharing modes allow (the full snapshot when all are allowed), the view's
// node indexes in snap, and why nodes were ruled out.
func (s *Scheduler) eligibleView(snap *snapshot, pod *corev1.Pod, reqs []workload.ContainerRequest, except map[string]bool, what string) (*placement.Cluster, []int, map[string]int) {
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	why := map[string]int{}
	var keep []int
	for i, n := range snap.nodes {
		if except[n.Name] {
			why["reserved for "+what]++
			continue
		}
		if r := eligible(pod, aff, n); r != "" {
			why[r]++
			continue
		}
		if r := sharingRule(reqs, pod.Spec.HostIPC, &snap.inv[i]); r != "" {
			why[r]++
			continue
		}
		keep = append(keep, i)
	}
	if len(keep) == len(snap.nodes) {
		return snap.cluster, keep, why
	}
	view := &placement.Cluster{Nodes: make([]placement.Node, len(keep))}
	for vi, i := range keep {
		view.Nodes[vi] = snap.cluster.Nodes[i]
	}
	return view, keep, why
}

// decide runs the engine (policy pol) for every GPU container of the pod: the first
// chooses the node, the others are placed on that node. It returns the
// assignment and the decisions, with nodes indexed in snap.
func (s *Scheduler) decide(pol placement.Policy, view *placement.Cluster, viewNodes []int, snap *snapshot, pod *corev1.Pod, reqs []workload.ContainerRequest, cpu, mem int64) (binding.Assignment, []placed, error) {
	name := pod.Namespace + "/" + pod.Name
	if len(reqs) == 0 {
		reqs = []workload.ContainerRequest{{}} // CPU-only pod: one host-only placement
	}
	// Later containers must see the earlier ones' bookings: only then is a
	// scratch copy needed (policies never change the cluster they read).
	work := view
	if len(reqs) > 1 {
		work = view.Clone()
	}
	var out []placed
	var a binding.Assignment
	node := -1
	for i, r := range reqs {
		p := placement.Pod{Name: name + "/" + r.Container, GPU: r.GPU}
		if i == 0 {
			p.CPUMilli, p.MemoryMiB = cpu, mem
		}
		cl := work
		if node >= 0 {
			cl = &placement.Cluster{Nodes: []placement.Node{work.Nodes[node]}}
		}
		d, err := pol.Place(cl, &p)
		if err != nil {
			if errors.Is(err, placement.ErrNoFit) {
				return a, nil, fmt.Errorf("no node fits %s: %w", describe(r.GPU), err)
			}
			return a, nil, err
		}
		if node >= 0 {
			d.Node = node
		}
		if len(reqs) > 1 {
			if err := work.Apply(&p, d); err != nil {
				return a, nil, fmt.Errorf("engine decision does not apply: %w", err)
			}
		}
		node = d.Node
		out = append(out, placed{pod: p, dec: d})
		if r.Container != "" {
			a.Containers = append(a.Containers, binding.Container{Name: r.Container, GPUs: s.shares(snap, viewNodes[d.Node], d, r.GPU)})
		}
	}
	a.Version, a.Node = binding.Version, snap.nodes[viewNodes[node]].Name
	return a, out, nil
}

// shares turns a decision into per-GPU grants with the request's defaults
// resolved against each chosen GPU.
func (s *Scheduler) shares(snap *snapshot, ni int, d placement.Decision, r request.GPU) []binding.Share {
	var out []binding.Share
	n := &snap.cluster.Nodes[ni]
	for k, pos := range d.GPUs {
		g := n.GPUs[pos]
		inv, _ := findGPU(&snap.inv[ni], g.Index)
		if r.MIGProfile != "" && k < len(d.MIG) {
			out = append(out, migShare(g, inv.UUID, d.MIG[k], r.MIGProfile))
			continue
		}
		c, cl := r.ResolveCompute(g.MemoryMiB)
		m, ml := r.ResolveMemory(g.MemoryMiB)
		if r.Exclusive {
			c, cl, m, ml = request.Whole, request.Whole, g.MemoryMiB, g.MemoryMiB
		}
		out = append(out, binding.Share{UUID: inv.UUID, Index: g.Index, ComputeMilli: c, ComputeLimitMilli: cl, MemoryMiB: max(m, 1), MemoryLimitMiB: max(ml, m, 1), MIGProfile: r.MIGProfile})
	}
	return out
}

// migShare is the share of one MIG instance the engine chose on GPU g
// (parent UUID parent): the instance taken (its UUID), or the one the node
// must create at ch.Start (the parent's UUID until it exists), with the
// profile's compute slices over the GPU's and its memory.
func migShare(g placement.GPU, parent string, ch placement.MIGChoice, profile string) binding.Share {
	s := binding.Share{UUID: ch.UUID, Index: g.Index, MIGProfile: profile,
		ComputeMilli: request.Whole, ComputeLimitMilli: request.Whole, MemoryMiB: 1, MemoryLimitMiB: 1,
		MIG: &binding.MIGInstance{GPU: parent, Start: ch.Start, Create: ch.Create}}
	if ch.Create {
		s.UUID = parent
	}
	if g.MIG != nil && g.MIG.Spec != nil {
		if i := g.MIG.Spec.ProfileIndex(profile); i >= 0 {
			p := g.MIG.Spec.Profiles[i]
			c := int64(p.ComputeSlices) * request.Whole / int64(g.MIG.Spec.ComputeSlices)
			s.MIGProfile, s.ComputeMilli, s.ComputeLimitMilli = p.Name, c, c
			s.MemoryMiB, s.MemoryLimitMiB = p.MemoryMiB, p.MemoryMiB
		}
	}
	return s
}

func describe(r request.GPU) string {
	if r.Count == 0 {
		return "the pod's CPU and memory"
	}
	return fmt.Sprintf("%d GPU(s) at compute %d/%d", r.Count, r.ComputeMilli, request.Whole)
}

func summarize(why map[string]int) string {
	var parts []string
	for r, n := range why {
		parts = append(parts, fmt.Sprintf("%d node(s): %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
