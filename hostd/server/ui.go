package server

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
	"github.com/tessera-gpu/tessera/webui"
)

// The host view of the web UI (package webui): the page at /, its JSON
// under /ui/api/ and its chart history, read from the daemon's own query
// methods (Status, Jobs, Queue, Queues: what tessera ps and tessera queue
// print) and the node arbiter's last step (Daemon.Usage).

// hostSource is the daemon as a webui.Source.
type hostSource struct {
	d   *hostd.Daemon
	now func() time.Time
}

func (h hostSource) Changed() <-chan struct{} { return h.d.Changed() }

func (h hostSource) Snapshot(ctx context.Context) (webui.Snapshot, error) {
	st, err := h.d.StatusUse(ctx)
	if err != nil {
		return webui.Snapshot{}, err
	}
	jobs, err := h.d.Jobs()
	if err != nil {
		return webui.Snapshot{}, err
	}
	waiting, err := h.d.Queue()
	if err != nil {
		return webui.Snapshot{}, err
	}
	queues, err := h.d.Queues()
	if err != nil {
		return webui.Snapshot{}, err
	}
	in := hostState{Status: st, Jobs: jobs, Waiting: waiting, Queues: queues, Now: h.now()}
	in.Seats, in.Arbiter, in.UsageErr = h.d.Usage(ctx)
	_, _, in.Metered, _ = h.d.UseRule()
	in.FragMilli, in.FreeMilli, in.TypicalShapes = h.d.Fragmentation()
	return hostSnapshot(in), nil
}

// hostState is what one snapshot of the host view is made from.
type hostState struct {
	Status   api.Status
	Jobs     []api.Job
	Waiting  []api.QueueEntry
	Queues   []api.QueueStatus
	Seats    []hostd.SeatUsage
	Arbiter  bool
	UsageErr error
	// Metered says a meter reads use (NVML, or the simulated one); the
	// uses themselves are in Status.GPUs (Daemon.StatusUse).
	Metered bool
	// FragMilli, FreeMilli and TypicalShapes are Daemon.Fragmentation's.
	FragMilli     float64
	FreeMilli     int64
	TypicalShapes int
	Now           time.Time
}

// hostSnapshot turns the daemon's answers into the page's Snapshot: GPUs
// from Status with the running jobs' shares on them, queues from Queues,
// pending jobs (and why they wait) from Queue, every job from Jobs.
func hostSnapshot(in hostState) webui.Snapshot {
	st := in.Status
	src := st.Source
	if st.Simulated {
		src += " (simulated)"
	}
	s := webui.Snapshot{Scope: "host", Title: "Tessera host", Source: src, Time: in.Now.UTC()}
	if in.TypicalShapes > 0 {
		s.Fragmentation = &webui.Fragmentation{Milli: int64(math.Round(in.FragMilli)), FreeMilli: in.FreeMilli, TypicalShapes: in.TypicalShapes}
	}

	seats := map[[2]string]hostd.SeatUsage{}
	for _, u := range in.Seats {
		seats[[2]string{u.Job, u.GPU}] = u
	}
	// Each running job's use of each GPU, as Daemon.StatusUse read it.
	uses := map[[2]string]gpuuse.Share{}
	for _, g := range st.GPUs {
		for _, u := range g.Shares {
			uses[[2]string{u.Workload, u.GPU}] = u
		}
	}
	switch {
	case !in.Arbiter:
		s.Notes = append(s.Notes, "No node arbiter: compute is not gated and nothing is measured.")
	case in.UsageErr != nil:
		s.Notes = append(s.Notes, "The node arbiter's reading failed: "+in.UsageErr.Error())
	case st.Simulated && in.Metered:
		s.Notes = append(s.Notes, "Simulated GPUs: use is simulated from each job's declared load (TESSERA_SIM_LOAD; none declared: no use) and labelled simulated; nothing is measured.")
	case st.Simulated:
		s.Notes = append(s.Notes, "Simulated GPUs: utilisation is not measured, so the measured columns say \"not metered\".")
	case !in.Metered && st.Sharing != "mps" && len(in.Seats) > 0:
		s.Notes = append(s.Notes, "No GPU utilisation meter (NVML): the node arbiter caps launch rate, not measured GPU time.")
	}
	if st.Use != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("Use is the busy fraction of each GPU over %gs windows; a job is an idle holder once its use stays below %s of a GPU for %v.",
			st.Use.WindowSeconds, quantity.FormatShare(st.Use.IdleBelowMilli), time.Duration(st.Use.IdleAfterSeconds*float64(time.Second))))
	}

	// GPUs, found by UUID (a MIG share by its parent's) or node and index.
	nodeNames := []string{}
	byUUID, byPos := map[string]int{}, map[[2]string]int{}
	for _, g := range st.GPUs {
		if len(nodeNames) == 0 || nodeNames[len(nodeNames)-1] != g.Node {
			nodeNames = append(nodeNames, g.Node)
		}
		booked := int64(float64(request.Whole)*(1-g.FreeFraction) + 0.5)
		s.GPUs = append(s.GPUs, webui.GPU{
			Node: g.Node, Index: g.Index, UUID: g.UUID, Model: g.Model,
			MemoryMiB: g.MemoryMiB, MemoryBookedMiB: g.MemoryMiB - g.FreeMemoryMiB,
			GuaranteedMilli: booked, Shares: []webui.Share{},
		})
		if g.Use != nil {
			s.GPUs[len(s.GPUs)-1].SetUse(*g.Use)
		}
		for _, in := range g.MIG {
			last := &s.GPUs[len(s.GPUs)-1]
			last.MIG = append(last.MIG, webui.MIGInstance{Profile: in.Profile, UUID: in.UUID, MemoryMiB: in.MemoryMiB, InUse: in.InUse})
		}
		if g.UUID != "" {
			byUUID[g.UUID] = len(s.GPUs) - 1
		}
		byPos[[2]string{g.Node, fmt.Sprint(g.Index)}] = len(s.GPUs) - 1
	}
	nodeOf := func(j api.Job) string {
		if j.Node >= 0 && j.Node < len(nodeNames) {
			return nodeNames[j.Node]
		}
		return ""
	}

	submitted := map[string]time.Time{}
	for _, j := range in.Jobs {
		submitted[j.ID] = j.Submitted
		w := webui.Workload{
			ID: j.ID, State: string(j.State), Queue: queueing.QueueOr(j.Queue), Priority: j.Priority, Request: webui.RequestText(j.GPU),
			Submitted: j.Submitted, Started: j.Started, Finished: j.Finished, ExitCode: j.ExitCode,
			// Anyone who reaches the dashboard reads it (no token over
			// TCP): a command's arguments may hold secrets, so only its
			// program's name is shown (tessera ps shows the rest to the
			// job's owner).
			Reason: j.Reason, Command: strings.Join(hostd.ProgramOnly(j.Command), " "), Seq: j.Seq,
		}
		// Where it runs, or ran (a finished job keeps its placement).
		if j.State != api.Queued {
			for _, sh := range j.Shares {
				w.Node = nodeOf(j)
				w.GPUs = append(w.GPUs, webui.WorkloadGPU{Index: sh.Index, GuaranteedMilli: sh.ComputeMilli, LimitMilli: sh.ComputeLimitMilli, MIGProfile: sh.MIGProfile})
			}
		}
		if j.State == api.Running {
			// The job is an idle holder when it is one on every GPU, since
			// the last of them went idle.
			var idle *gpuuse.Idle
			allIdle := len(j.Shares) > 0
			for _, sh := range j.Shares {
				gi, ok := gpuOf(sh.UUID, sh.MIG, w.Node, sh.Index, byUUID, byPos)
				if !ok {
					continue
				}
				share := webui.Share{
					Workload: j.ID, Queue: w.Queue, GuaranteedMilli: sh.ComputeMilli, LimitMilli: sh.ComputeLimitMilli,
					MemoryMiB: sh.MemoryMiB, MemoryLimitMiB: sh.MemoryLimitMiB, MIGProfile: sh.MIGProfile,
				}
				if u, ok := seats[[2]string{j.ID, sh.UUID}]; ok {
					share.Arbiter = &webui.ArbiterSeat{Phase: u.Phase, GrantedMilli: u.GrantedMilli, DemandMilli: u.DemandMilli, Metered: u.Metered}
					if j.InterceptLib != "" {
						used := int64(u.MemoryBytes >> 20)
						share.MemoryUsedMiB = &used
					}
				}
				g := &s.GPUs[gi]
				if u, ok := uses[[2]string{j.ID, g.UUID}]; ok {
					use := u.Use
					share.Use, share.Idle = &use, u.Idle
					if use.MemoryUsedMiB != nil {
						share.MemoryUsedMiB = use.MemoryUsedMiB
					}
				}
				if u, ok := uses[[2]string{j.ID, g.UUID}]; ok && u.Idle != nil {
					if idle == nil || u.Idle.Since.After(idle.Since) {
						since := *u.Idle
						idle = &since
					}
				} else {
					allIdle = false
				}
				g.Shares = append(g.Shares, share)
				g.LimitMilli = min(request.Whole, g.LimitMilli+max(sh.ComputeLimitMilli, sh.ComputeMilli))
			}
			if allIdle {
				w.Idle = idle
			}
		}
		if j.State == api.Queued && j.LastPreemption != nil && w.Reason == "" {
			w.Reason = j.LastPreemption.Reason
		}
		if j.State == api.Running && j.Preempt != nil {
			w.Reason = "being preempted by " + j.Preempt.By + ": " + j.Preempt.Reason
		}
		s.Workloads = append(s.Workloads, w)
	}
	// A GPU's burst limit is at least what is guaranteed on it.
	for i := range s.GPUs {
		s.GPUs[i].LimitMilli = max(s.GPUs[i].LimitMilli, s.GPUs[i].GuaranteedMilli)
	}

	reasons := map[string]string{}
	for _, e := range in.Waiting {
		reasons[e.ID] = e.Reason
		s.Pending = append(s.Pending, webui.Pending{
			Position: e.Position, ID: e.ID, Queue: queueing.QueueOr(e.Queue), Priority: e.Priority,
			Request: e.Request, Reason: e.Reason, Submitted: submitted[e.ID],
		})
	}
	for i, w := range s.Workloads {
		if r, ok := reasons[w.ID]; ok {
			s.Workloads[i].Reason = r
		}
	}
	for _, q := range in.Queues {
		cfg := queueing.Queue{Name: q.Name, Parent: q.Parent, Priority: q.Priority, Weight: q.Weight, Guaranteed: q.Guaranteed, Limit: q.Limit}
		s.Queues = append(s.Queues, webui.QueueOf(cfg, q.Configured, q.Used, q.Share, q.Running, q.Waiting))
	}
	return s
}

// gpuOf finds a share's GPU in the snapshot: by UUID (a MIG instance's
// parent GPU), else by node and index.
func gpuOf(uuid string, mig *binding.MIGInstance, node string, index int, byUUID map[string]int, byPos map[[2]string]int) (int, bool) {
	if mig != nil {
		if gi, ok := byUUID[mig.GPU]; ok {
			return gi, true
		}
	}
	if gi, ok := byUUID[uuid]; ok {
		return gi, true
	}
	gi, ok := byPos[[2]string{node, fmt.Sprint(index)}]
	return gi, ok
}
