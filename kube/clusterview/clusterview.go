package clusterview

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/request"
	"github.com/tessera-gpu/tessera/webui"
)

// Viewer is what the cluster view reads: *scheduler.Scheduler.
type Viewer interface {
	View() (View, bool)
	ViewChanged() <-chan struct{}
}

// ErrNoView is returned before the scheduler has finished a cycle (and on
// a replica that does not hold the leader lease).
// It wraps webui.ErrNoState.
var ErrNoView = fmt.Errorf("the scheduler has not finished a scheduling cycle yet, or this replica is not the leader (open the page on the replica that holds the lease): %w", webui.ErrNoState)

// Source is the scheduler as a webui.Source.
type Source struct {
	Viewer Viewer
	// Now stamps snapshots (default time.Now).
	Now func() time.Time
}

// Changed implements webui.Source.
func (s Source) Changed() <-chan struct{} { return s.Viewer.ViewChanged() }

// Snapshot implements webui.Source.
func (s Source) Snapshot(context.Context) (webui.Snapshot, error) {
	v, ok := s.Viewer.View()
	if !ok {
		return webui.Snapshot{}, ErrNoView
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return Translate(v, now()), nil
}

// labelSource is the inventory source of nodes read from their labels
// (nodeinventory.Labels): nothing on them is reported.
const labelSource = "node-labels"

// Translate turns the scheduler's view into the page's snapshot, taken at
// now.
func Translate(v View, now time.Time) webui.Snapshot {
	s := webui.Snapshot{Scope: "cluster", Title: "Tessera cluster", Time: now.UTC(),
		Source: fmt.Sprintf("scheduler %s · policy %s · %d nodes · last cycle %s", v.Scheduler, v.Policy, len(v.Nodes), v.Time.UTC().Format(time.RFC3339))}
	if v.Typical > 0 {
		var free int64
		for _, n := range v.Nodes {
			for _, g := range n.GPUs {
				free += g.FreeMilli
			}
		}
		s.Fragmentation = &webui.Fragmentation{Milli: int64(math.Round(v.FragmentationMilli)), FreeMilli: free, TypicalShapes: v.Typical}
	}
	var labelled, unhealthy []string
	uses := make(map[string]nodeUse, len(v.Nodes))
	for _, n := range v.Nodes {
		st, ok := v.Use[n.Name]
		nu := useOf(n.Name, st, ok, now)
		uses[n.Name] = nu
		if n.Source == labelSource && len(n.GPUs) > 0 {
			labelled = append(labelled, n.Name)
		}
		for _, g := range n.GPUs {
			if !g.Schedulable {
				unhealthy = append(unhealthy, fmt.Sprintf("%s GPU %d", n.Name, g.Index))
			}
		}
		s.Nodes = append(s.Nodes, webui.Node{Name: n.Name, Ready: n.Ready, Cordoned: n.Unschedulable, Source: n.Source,
			CPUMilli: n.CPUMilli, FreeCPUMilli: n.FreeCPUMilli, MemoryMiB: n.MemoryMiB, FreeMemoryMiB: n.FreeMemoryMiB, Pods: len(n.Pods)})
		gpuStart := len(s.GPUs)
		for _, g := range n.GPUs {
			wg := gpuOf(n, g)
			wg.SetUse(nu.gpu(g.UUID))
			s.GPUs = append(s.GPUs, wg)
		}
		gpus := s.GPUs[gpuStart:]
		for _, p := range n.Pods {
			w := workloadOf(p)
			// (Shares are sorted below: a cycle lists its bookings in no
			// particular order.)
			w.State, w.Node = webui.StateRunning, n.Name
			// The pod is an idle holder when it is one on every GPU it
			// holds, since the last of them went idle (as a host job).
			var idle *gpuuse.Idle
			busy := false
			if p.Assignment != nil {
				for _, c := range p.Assignment.Containers {
					for _, sh := range c.GPUs {
						w.GPUs = append(w.GPUs, webui.WorkloadGPU{Index: sh.Index, GuaranteedMilli: sh.ComputeMilli, LimitMilli: sh.ComputeLimitMilli, MIGProfile: sh.MIGProfile})
						g := findGPU(gpus, sh)
						if g == nil {
							continue
						}
						u, i, again := nu.share(w.ID, g.UUID)
						addShare(g, w, sh, u, i)
						if again {
							continue // the pod's first share of this GPU has its mark
						}
						switch {
						case i == nil:
							busy = true
						case idle == nil || i.Since.After(idle.Since):
							idle = &gpuuse.Idle{Since: i.Since}
						}
					}
				}
			}
			if !busy {
				w.Idle = idle
			}
			s.Workloads = append(s.Workloads, w)
		}
	}
	s.Notes = append(s.Notes, useNotes(v, uses)...)
	for i := range s.GPUs {
		slices.SortStableFunc(s.GPUs[i].Shares, func(a, b webui.Share) int { return strings.Compare(a.Workload, b.Workload) })
	}
	if len(labelled) > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d node(s) have no GPUNode object (no Tessera agent): their GPUs are read from node labels with the catalog's memory, and nothing on them is reported (%s).", len(labelled), listSome(labelled)))
	}
	if len(unhealthy) > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d GPU(s) are not healthy and the scheduler places nothing on them: %s.", len(unhealthy), listSome(unhealthy)))
	}
	for _, q := range v.Queues {
		s.Queues = append(s.Queues, webui.QueueOf(q.Queue, q.Configured, q.Used, q.Share, q.Running, q.Waiting))
	}
	for i, p := range v.Pending {
		w := workloadOf(p)
		w.State, w.Reason = webui.StateQueued, Reason(p)
		s.Pending = append(s.Pending, webui.Pending{Position: i + 1, ID: w.ID, Queue: w.Queue, Priority: w.Priority, Request: w.Request, Reason: w.Reason, Submitted: w.Submitted})
		s.Workloads = append(s.Workloads, w)
	}
	return s
}

// Reason is why a pending pod waits, as the page shows it: the message of
// the PodScheduled=False condition the scheduler wrote, word for word
// (its reason when it has no message; a note when it has none yet).
func Reason(p PodView) string {
	r := p.Message
	if r == "" {
		r = p.Reason
	}
	if r == "" {
		r = "not tried yet: the scheduler has not decided on it"
	}
	return r
}

func workloadOf(p PodView) webui.Workload {
	w := webui.Workload{ID: p.Namespace + "/" + p.Name, Queue: p.Queue, Priority: int(p.Priority), Request: requestText(p), Submitted: p.Created}
	if !p.Started.IsZero() {
		t := p.Started
		w.Started = &t
	}
	var what []string
	if p.Gang != "" {
		what = append(what, "gang "+p.Gang)
	}
	if p.Deleting {
		what = append(what, "being deleted (still counted)")
	}
	if p.BackingOff {
		what = append(what, "backing off before its next try")
	}
	if p.Phase != "" {
		what = append(what, "phase "+string(p.Phase))
	}
	// The page's last column (a host job's command) holds these details.
	w.Command = strings.Join(what, "; ")
	return w
}

// requestText is a pod's GPU requests in words ("2x 0.5 GPU 40Gi"), one
// per container asking for GPUs; CPU-only pods say their CPU and memory.
func requestText(p PodView) string {
	if p.RequestError != "" {
		return "invalid: " + p.RequestError
	}
	if len(p.Requests) == 0 {
		return fmt.Sprintf("no GPU (CPU %s, memory %s)", quantity.FormatShare(p.CPUMilli), quantity.FormatMiB(p.MemoryMiB))
	}
	parts := make([]string, len(p.Requests))
	for i, g := range p.Requests {
		parts[i] = webui.RequestText(g)
	}
	return strings.Join(parts, " + ")
}

// gpuOf is one GPU with placement's books: guaranteed compute and memory
// booked are what placement no longer offers. A GPU placement does not
// offer (unhealthy) counts its shares instead (added by addShare).
func gpuOf(n NodeView, g GPUView) webui.GPU {
	out := webui.GPU{Node: n.Name, Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryMiB: g.MemoryMiB,
		Health: string(g.Health), HealthReason: g.HealthReason, Unschedulable: !g.Schedulable, Shares: []webui.Share{}}
	if g.Schedulable {
		out.GuaranteedMilli = request.Whole - g.FreeMilli
		out.MemoryBookedMiB = g.MemoryMiB - g.FreeMemoryMiB
	}
	for _, in := range g.MIGInstances {
		out.MIG = append(out.MIG, webui.MIGInstance{Profile: in.Profile, UUID: in.UUID, MemoryMiB: in.MemoryMiB, InUse: in.InUse})
	}
	return out
}

// findGPU is the GPU of gpus a share lies on: by UUID, a MIG share by its
// parent's.
func findGPU(gpus []webui.GPU, sh binding.Share) *webui.GPU {
	uuid := sh.UUID
	if sh.MIG != nil {
		uuid = sh.MIG.GPU
	}
	for i := range gpus {
		if gpus[i].UUID == uuid {
			return &gpus[i]
		}
	}
	for i := range gpus {
		for _, in := range gpus[i].MIG {
			if in.UUID != "" && in.UUID == sh.UUID {
				return &gpus[i]
			}
		}
	}
	return nil
}

// addShare puts a pod's share on its GPU with its use and idle mark; a
// MIG share marks its instance in use.
func addShare(g *webui.GPU, w webui.Workload, sh binding.Share, use gpuuse.Use, idle *gpuuse.Idle) {
	g.Shares = append(g.Shares, webui.Share{Workload: w.ID, Queue: w.Queue, GuaranteedMilli: sh.ComputeMilli, LimitMilli: sh.ComputeLimitMilli,
		MemoryMiB: sh.MemoryMiB, MemoryLimitMiB: sh.MemoryLimitMiB, MIGProfile: sh.MIGProfile, Use: &use, Idle: idle, MemoryUsedMiB: use.MemoryUsedMiB})
	g.LimitMilli = min(request.Whole, g.LimitMilli+sh.ComputeLimitMilli)
	if g.Unschedulable {
		g.GuaranteedMilli = min(request.Whole, g.GuaranteedMilli+sh.ComputeMilli)
		g.MemoryBookedMiB = min(g.MemoryMiB, g.MemoryBookedMiB+sh.MemoryMiB)
	}
	if sh.MIG != nil {
		for i := range g.MIG {
			if g.MIG[i].UUID != "" && g.MIG[i].UUID == sh.UUID {
				g.MIG[i].InUse = true
			}
		}
	}
}

// listSome names the first few of names.
func listSome(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
}
