package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

type outcome int

const (
	outcomeBound outcome = iota
	outcomeInvalid
	outcomeUnschedulable
	outcomeError
)

// plan decides where a pod goes without changing snap or the API. On
// success the outcome is outcomeBound (to be done by commit); otherwise it
// is the reason the pod stays pending, with a message naming the cause.
func (s *Scheduler) plan(snap *snapshot, pod *corev1.Pod) (plan, outcome, string) {
	return s.planExcept(snap, pod, nil, "")
}

// planExcept is plan with the except nodes (by name) ruled out as reserved
// for what. The engine's part is cycle.Plan: the first GPU container
// chooses the node, the others go beside it (a node that cannot take them
// all is ruled out and the first placed again).
func (s *Scheduler) planExcept(snap *snapshot, pod *corev1.Pod, except map[string]bool, what string) (plan, outcome, string) {
	pw, err := s.podWorkOf(snap, pod)
	if err != nil {
		return plan{}, outcomeOf(err), err.Error()
	}
	w, reqs := pw.w, pw.reqs
	if len(except) > 0 {
		own := w.Exclude
		w.Exclude = func(i int) string {
			if except[snap.nodes[i].Name] {
				return "reserved for " + what
			}
			if own == nil {
				return ""
			}
			return own(i)
		}
	}
	o, err := cycle.Plan(snap.cluster, w, nil)
	if err != nil {
		return plan{}, outcomeError, err.Error()
	}
	switch o.Status {
	case cycle.Placed:
	case cycle.Invalid:
		return plan{}, outcomeInvalid, o.Message
	default:
		return plan{}, outcomeUnschedulable, noFit(reqs, w.Parts, o)
	}
	return s.planFrom(context.TODO(), snap, pod, pw, o.Decisions)
}

// outcomeOf is the outcome of a pod that could not be translated: it
// waits for a claim (claimWait), or is refused.
func outcomeOf(err error) outcome {
	var wait claimWait
	if errors.As(err, &wait) {
		return outcomeUnschedulable
	}
	return outcomeInvalid
}

// planFrom turns the cycle's decisions for a pod's parts (pw; nodes
// indexed in snap) into its plan: the assignment with each GPU container's
// shares, encoded for its annotation, and the allocation of its claims.
func (s *Scheduler) planFrom(ctx context.Context, snap *snapshot, pod *corev1.Pod, pw podWork, decisions []placement.Decision) (plan, outcome, string) {
	reqs, parts := pw.reqs, pw.w.Parts
	pl := plan{assignment: binding.Assignment{Version: binding.Version, Node: snap.nodes[decisions[0].Node].Name}}
	for i, d := range decisions {
		pl.placed = append(pl.placed, placed{pod: parts[i], dec: d})
		if r := reqs[i]; r.Container != "" {
			pl.assignment.Containers = append(pl.assignment.Containers, binding.Container{Name: r.Container, GPUs: s.shares(snap, d.Node, d, r.GPU)})
		}
	}
	if len(pl.assignment.Containers) > 0 {
		// Encoded here, not at bind time, so that a record that cannot be
		// written fails the plan (and a gang's plan) before anything binds.
		var err error
		if pl.encoded, err = binding.Encode(pl.assignment); err != nil {
			return plan{}, outcomeError, fmt.Sprintf("annotation %s: %v", binding.AnnotationKey, err)
		}
	}
	if pw.claims != nil {
		var oc outcome
		var msg string
		if pl.claims, pl.claimUse, oc, msg = s.allocateClaims(ctx, snap, pw.claims, parts, decisions); oc != outcomeBound {
			return plan{}, oc, fmt.Sprintf("pod %s/%s: DRA claims: %s", pod.Namespace, pod.Name, msg)
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
	// claims are the DRA claims the binding writes first, claimUse the GPU
	// compute and memory the ones it allocates take.
	claims   []claimWrite
	claimUse queueing.Resources
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
		snap.record(ni, booking{pod: pod, parts: pl.placed, exact: exact, shares: shareResources(pl.assignment).Add(pl.claimUse)})
	}
}

// commit books a planned pod on snap (or, when booked, records a booking
// the cycle already made), assumes it (so later cycles count it until the
// informer shows it bound) and hands its binding to the binder.
// A binding that fails un-assumes the pod, reports why on it and backs off
// key, after which the pod is scheduled again, unless the pod turns out
// bound after all (settleFailedBind).
func (s *Scheduler) commit(ctx context.Context, snap *snapshot, pod *corev1.Pod, pl plan, key string, booked bool) outcome {
	a := pl.assignment
	bound := pod.DeepCopy()
	bound.Spec.NodeName = a.Node
	if pl.encoded != "" {
		if bound.Annotations == nil {
			bound.Annotations = map[string]string{}
		}
		bound.Annotations[binding.AnnotationKey] = pl.encoded
	}
	if booked {
		snap.record(pl.placed[0].dec.Node, booking{pod: bound, parts: pl.placed, exact: true, shares: shareResources(pl.assignment).Add(pl.claimUse)})
	} else {
		s.book(snap, bound, pl)
	}
	s.assume(bound)
	s.assumeClaims(pod, pl.claims)
	job := func(ctx context.Context) {
		// A PodScheduled=False decided by an earlier cycle must not land
		// after the binding.
		s.events.settle(ctx, pod.UID)
		if err := s.writeClaims(ctx, pod, pl.claims); err != nil {
			s.undoClaims(ctx, pod, pl.claims)
			s.forgetClaims(pod, pl.claims)
			s.bindFailed(ctx, key, pod, err)
			return
		}
		if err := s.bind(ctx, pod, a.Node, pl.encoded); err != nil {
			if s.settleFailedBind(ctx, pod, err) {
				s.backoff.forget(key)
				return
			}
			s.undoClaims(ctx, pod, pl.claims)
			s.forgetClaims(pod, pl.claims)
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

// noFit says why a pod (its parts' requests reqs) fits on no node: what its
// first part asks and the nodes' rejections, counted per reason.
func noFit(reqs []workload.ContainerRequest, parts []placement.Pod, o cycle.Outcome) string {
	return fmt.Sprintf("no node fits %s for %s: %s", describe(reqs[0].GPU), parts[0].Name, cycle.Summarize(o.Rejections))
}

func describe(r request.GPU) string {
	if r.Count == 0 {
		return "the pod's CPU and memory"
	}
	return fmt.Sprintf("%d GPU(s) at compute %d/%d", r.Count, r.ComputeMilli, request.Whole)
}
