package webui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// Workload states as the page shows and filters them: the host daemon's
// job states (hostd/api).
const (
	StateRunning = "running"
	StateQueued  = "queued"
)

// Snapshot is what the page shows at one moment: one read of the state the
// scheduler (or host daemon) decides from. Amounts of GPU compute are in
// thousandths of a GPU (milli), memory in MiB.
type Snapshot struct {
	// Scope is "host" (one host daemon) or "cluster".
	Scope string `json:"scope"`
	// Title heads the page ("Tessera host").
	Title string `json:"title"`
	// Source names where the GPUs come from ("sim:8xH200 (simulated)").
	Source string `json:"source"`
	// Time is when the state was read, by the server's clock.
	Time time.Time `json:"time"`
	// Notes say what the page cannot show and why (no utilisation meter,
	// a reading that failed).
	Notes []string `json:"notes,omitempty"`

	Totals Totals `json:"totals"`
	// Fragmentation is the free GPU compute the typical pods could not
	// use, the simulator's measure (placement.ClusterFragmentation) against
	// the placement policy's typical pods; nil when the source has none
	// (the policy has learned no distribution yet).
	Fragmentation *Fragmentation `json:"fragmentation,omitempty"`
	Models        []ModelSummary `json:"models"`
	// Nodes are the cluster's nodes (Scope "cluster"; none for a host);
	// Summarize fills their Capacity from GPUs.
	Nodes  []Node  `json:"nodes,omitempty"`
	GPUs   []GPU   `json:"gpus"`
	Queues []Queue `json:"queues"`
	// Pending are the waiting workloads in the order they will start.
	Pending []Pending `json:"pending"`
	// Workloads are live ones first, then finished ones, newest first
	// within each (SortWorkloads); at most MaxFinished finished ones.
	Workloads []Workload `json:"workloads"`
	// WorkloadsOmitted counts the older finished workloads left out.
	WorkloadsOmitted int `json:"workloadsOmitted,omitempty"`

	// Sample is this snapshot as a chart point, and History what the
	// page needs to fetch the chart's earlier points; the UI sets both.
	Sample  Sample      `json:"sample"`
	History HistoryInfo `json:"history"`
}

// Capacity is the GPU compute and memory of a set of GPUs and what running
// workloads have booked on them.
type Capacity struct {
	// CapacityMilli is 1000 per GPU.
	CapacityMilli int64 `json:"capacityMilli"`
	// GuaranteedMilli is the guaranteed compute booked by running
	// workloads: what placement counts as taken.
	GuaranteedMilli int64 `json:"guaranteedMilli"`
	// LimitMilli sums the burst limits of those workloads' shares (each
	// GPU's sum capped at one GPU): what they may use when others idle.
	LimitMilli int64 `json:"limitMilli"`
	// MeasuredMilli sums the GPUs' measured use (GPU.MeasuredMilli), and
	// SimulatedMilli their simulated use; nil when no GPU has that figure.
	MeasuredMilli   *int64 `json:"measuredMilli,omitempty"`
	SimulatedMilli  *int64 `json:"simulatedMilli,omitempty"`
	MemoryMiB       int64  `json:"memoryMiB"`
	MemoryBookedMiB int64  `json:"memoryBookedMiB"`
}

// add counts one GPU in.
func (c *Capacity) add(g GPU) {
	c.CapacityMilli += 1000
	c.GuaranteedMilli += g.GuaranteedMilli
	c.LimitMilli += g.LimitMilli
	c.MemoryMiB += g.MemoryMiB
	c.MemoryBookedMiB += g.MemoryBookedMiB
	if g.MeasuredMilli != nil {
		c.MeasuredMilli = addPtr(c.MeasuredMilli, *g.MeasuredMilli)
	}
	if g.SimulatedMilli != nil {
		c.SimulatedMilli = addPtr(c.SimulatedMilli, *g.SimulatedMilli)
	}
}

// Fragmentation is the expected fragmentation of the free GPU compute.
type Fragmentation struct {
	// Milli is the fragmented GPU compute, in thousandths of a GPU.
	Milli int64 `json:"milli"`
	// FreeMilli is the free GPU compute it is part of.
	FreeMilli int64 `json:"freeMilli"`
	// TypicalShapes counts the pod shapes it is measured against.
	TypicalShapes int `json:"typicalShapes"`
}

// Totals sum the GPUs and workloads.
type Totals struct {
	GPUs int `json:"gpus"`
	Capacity
	Running  int `json:"running"`
	Waiting  int `json:"waiting"`
	Finished int `json:"finished"`
}

// ModelSummary is Totals for the GPUs of one model.
type ModelSummary struct {
	Model string `json:"model"`
	GPUs  int    `json:"gpus"`
	Capacity
}

// Node is one node of a cluster as the scheduler sees it.
type Node struct {
	Name string `json:"name"`
	// Ready is its Ready condition; Cordoned its spec.unschedulable.
	Ready    bool `json:"ready"`
	Cordoned bool `json:"cordoned,omitempty"`
	// Source is where its GPUs were read from ("node-labels", or the
	// GPUNode's source as the agent reported it).
	Source string `json:"source"`
	// CPUMilli and MemoryMiB are allocatable; the Free ones what the
	// scheduler's bookings leave.
	CPUMilli      int64 `json:"cpuMilli"`
	FreeCPUMilli  int64 `json:"freeCpuMilli"`
	MemoryMiB     int64 `json:"memoryMiB"`
	FreeMemoryMiB int64 `json:"freeMemoryMiB"`
	// Pods counts the pods booked on it (GPU or not).
	Pods int `json:"pods"`
	// GPUs and GPU are its GPUs' count and Capacity (Summarize).
	GPUs int      `json:"gpus"`
	GPU  Capacity `json:"gpu"`
}

// GPU is one GPU and the shares on it.
type GPU struct {
	Node  string `json:"node"`
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Model string `json:"model"`
	// MemoryMiB is the GPU's memory; MemoryBookedMiB what running
	// workloads have booked of it.
	MemoryMiB       int64 `json:"memoryMiB"`
	MemoryBookedMiB int64 `json:"memoryBookedMiB"`
	// GuaranteedMilli is the guaranteed compute booked on it.
	GuaranteedMilli int64 `json:"guaranteedMilli"`
	// LimitMilli sums its shares' burst limits, capped at 1000.
	LimitMilli int64 `json:"limitMilli"`
	// Use is the GPU's use, the sum of its shares' (gpuuse.GPU.Sum):
	// measured, simulated, or not metered and why; nil where the source
	// reads no use.
	Use *gpuuse.Use `json:"use,omitempty"`
	// MeasuredMilli is Use's busy fraction when measured (NVML), and
	// SimulatedMilli when simulated: never one for the other.
	MeasuredMilli  *int64 `json:"measuredMilli,omitempty"`
	SimulatedMilli *int64 `json:"simulatedMilli,omitempty"`
	// Health is Healthy, Unhealthy or Unknown as the node reports it (""
	// when not reported), HealthReason why; Unschedulable marks a GPU the
	// scheduler does not place on (an unhealthy one).
	Health        string `json:"health,omitempty"`
	HealthReason  string `json:"healthReason,omitempty"`
	Unschedulable bool   `json:"unschedulable,omitempty"`
	// MIG lists its MIG instances when in MIG mode.
	MIG    []MIGInstance `json:"mig,omitempty"`
	Shares []Share       `json:"shares"`
}

// MIGInstance is one MIG instance of a GPU.
type MIGInstance struct {
	Profile   string `json:"profile"`
	UUID      string `json:"uuid,omitempty"`
	MemoryMiB int64  `json:"memoryMiB"`
	// InUse: a workload holds it.
	InUse bool `json:"inUse"`
}

// Share is one workload's part of one GPU.
type Share struct {
	Workload string `json:"workload"`
	Queue    string `json:"queue"`
	// GuaranteedMilli and LimitMilli are the share's guaranteed compute
	// and burst limit.
	GuaranteedMilli int64 `json:"guaranteedMilli"`
	LimitMilli      int64 `json:"limitMilli"`
	// MemoryMiB is the guaranteed memory, MemoryLimitMiB the cap.
	MemoryMiB      int64 `json:"memoryMiB"`
	MemoryLimitMiB int64 `json:"memoryLimitMiB"`
	// MemoryUsedMiB is what the workload holds, by the interception
	// library's accounting; nil when unknown (it runs without the library).
	MemoryUsedMiB *int64 `json:"memoryUsedMiB,omitempty"`
	// MIGProfile is set for a whole MIG instance.
	MIGProfile string `json:"migProfile,omitempty"`
	// Arbiter is the node arbiter's last step for this share; nil when
	// the share is not registered with it (MIG, no arbiter).
	Arbiter *ArbiterSeat `json:"arbiter,omitempty"`
	// Use is what the workload used of the GPU (measured, simulated, or
	// not metered and why), Idle set while it is an idle holder.
	Use  *gpuuse.Use  `json:"use,omitempty"`
	Idle *gpuuse.Idle `json:"idle,omitempty"`
}

// ArbiterSeat is what the node arbiter did for a share in its last step.
type ArbiterSeat struct {
	// Phase is active, idle or reclaimed; mps in MPS mode.
	Phase string `json:"phase"`
	// GrantedMilli is the compute it granted for the period (in MPS mode,
	// the cap MPS enforces); DemandMilli its estimate of the demand.
	GrantedMilli int64 `json:"grantedMilli"`
	DemandMilli  int64 `json:"demandMilli"`
	// Metered says the grant follows measured GPU time (NVML).
	Metered bool `json:"metered"`
}

// Queue is one queue's configuration, usage and fair-share position.
type Queue struct {
	Name       string `json:"name"`
	Parent     string `json:"parent,omitempty"`
	Configured bool   `json:"configured"`
	Priority   int32  `json:"priority"`
	Weight     int32  `json:"weight"`
	// Guaranteed, Limit (0: none) and Used GPU compute and memory.
	GuaranteedMilli     int64 `json:"guaranteedMilli"`
	GuaranteedMemoryMiB int64 `json:"guaranteedMemoryMiB"`
	LimitMilli          int64 `json:"limitMilli"`
	LimitMemoryMiB      int64 `json:"limitMemoryMiB"`
	UsedMilli           int64 `json:"usedMilli"`
	UsedMemoryMiB       int64 `json:"usedMemoryMiB"`
	// MeasuredMilli and SimulatedMilli sum the use of its workloads'
	// shares (with its children's), measured and simulated apart; nil when
	// none of them carries that figure (Summarize fills them from GPUs).
	MeasuredMilli  *int64 `json:"measuredMilli,omitempty"`
	SimulatedMilli *int64 `json:"simulatedMilli,omitempty"`
	// Share is the fair-share position: below 1 the part of its
	// guarantee in use, above it 1 plus its over-quota share per weight.
	Share   float64 `json:"share"`
	Running int     `json:"running"`
	Waiting int     `json:"waiting"`
}

// Pending is a waiting workload with why it waits.
type Pending struct {
	Position  int       `json:"position"`
	ID        string    `json:"id"`
	Queue     string    `json:"queue"`
	Priority  int       `json:"priority"`
	Request   string    `json:"request"`
	Reason    string    `json:"reason"`
	Submitted time.Time `json:"submitted"`
}

// Workload is one job (or pod group).
type Workload struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Queue    string `json:"queue"`
	Priority int    `json:"priority"`
	// Request is the GPU request in words ("2x 0.5 GPU 40Gi").
	Request string `json:"request"`
	// GPUs are the shares it holds ("0:0.5"), where it runs.
	GPUs []WorkloadGPU `json:"gpus,omitempty"`
	// Node is where it runs ("" while waiting).
	Node      string     `json:"node,omitempty"`
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"`
	Finished  *time.Time `json:"finished,omitempty"`
	ExitCode  *int       `json:"exitCode,omitempty"`
	// Reason says why it waits (Pending's) or why it ended.
	Reason  string `json:"reason,omitempty"`
	Command string `json:"command,omitempty"`
	// Seq orders workloads submitted in the same instant (host job seq).
	Seq uint64 `json:"seq,omitempty"`
	// Idle is set when the workload is an idle holder on every GPU it
	// holds (Since: when the last of them went idle).
	Idle *gpuuse.Idle `json:"idle,omitempty"`
}

// WorkloadGPU is a workload's share of one GPU.
type WorkloadGPU struct {
	Index           int    `json:"index"`
	GuaranteedMilli int64  `json:"guaranteedMilli"`
	LimitMilli      int64  `json:"limitMilli"`
	MIGProfile      string `json:"migProfile,omitempty"`
	// Use is what the workload used of this GPU: its share's use on the
	// GPU (Summarize fills it), nil when the share carries none.
	Use *gpuuse.Use `json:"use,omitempty"`
}

// Live reports whether w is running or waiting.
func (w Workload) Live() bool { return w.State == StateRunning || w.State == StateQueued }

// SortWorkloads orders ws as the workload list shows them: live ones
// (running or waiting) first, then finished ones; newest submitted first
// within each.
func SortWorkloads(ws []Workload) {
	slices.SortStableFunc(ws, func(a, b Workload) int {
		if a.Live() != b.Live() {
			if a.Live() {
				return -1
			}
			return 1
		}
		if c := b.Submitted.Compare(a.Submitted); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Seq, a.Seq); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
}

// Trim sorts s.Workloads (SortWorkloads) and keeps at most maxFinished
// finished ones, the newest, counting the rest in WorkloadsOmitted; a
// negative maxFinished keeps all.
func (s *Snapshot) Trim(maxFinished int) {
	SortWorkloads(s.Workloads)
	if maxFinished < 0 {
		return
	}
	kept, finished := s.Workloads[:0], 0
	for _, w := range s.Workloads {
		if !w.Live() {
			finished++
			if finished > maxFinished {
				s.WorkloadsOmitted++
				continue
			}
		}
		kept = append(kept, w)
	}
	s.Workloads = kept
}

// SetUse sets g.Use and the figure it carries (MeasuredMilli or
// SimulatedMilli, by its source).
func (g *GPU) SetUse(u gpuuse.Use) {
	g.Use, g.MeasuredMilli, g.SimulatedMilli = &u, nil, nil
	if u.BusyMilli == nil {
		return
	}
	m := *u.BusyMilli
	switch u.Source {
	case gpuuse.Measured:
		g.MeasuredMilli = &m
	case gpuuse.Simulated:
		g.SimulatedMilli = &m
	}
}

// Summarize fills s.Totals and s.Models from s.GPUs, and the workload
// counts from s.Workloads (before Trim) and s.Pending.
func (s *Snapshot) Summarize() {
	t := Totals{}
	byModel := map[string]*ModelSummary{}
	var models []string
	byNode := make(map[string]int, len(s.Nodes))
	for i := range s.Nodes {
		byNode[s.Nodes[i].Name] = i
		s.Nodes[i].GPUs, s.Nodes[i].GPU = 0, Capacity{}
	}
	for _, g := range s.GPUs {
		if i, ok := byNode[g.Node]; ok {
			s.Nodes[i].GPUs++
			s.Nodes[i].GPU.add(g)
		}
		m := byModel[g.Model]
		if m == nil {
			m = &ModelSummary{Model: g.Model}
			byModel[g.Model] = m
			models = append(models, g.Model)
		}
		m.GPUs++
		m.add(g)
		t.GPUs++
		t.add(g)
	}
	for _, w := range s.Workloads {
		switch w.State {
		case StateRunning:
			t.Running++
		case StateQueued:
		default:
			t.Finished++
		}
	}
	t.Waiting = len(s.Pending)
	s.Totals = t
	s.sumQueueUse()
	s.workloadUse()
	s.Models = make([]ModelSummary, 0, len(models))
	slices.Sort(models)
	for _, name := range models {
		s.Models = append(s.Models, *byModel[name])
	}
}

// sumQueueUse fills each queue's measured and simulated use from the
// shares' use on s.GPUs: a share counts in its queue and that queue's
// parents, as their Used does.
func (s *Snapshot) sumQueueUse() {
	byName := make(map[string]int, len(s.Queues))
	for i := range s.Queues {
		byName[s.Queues[i].Name] = i
		s.Queues[i].MeasuredMilli, s.Queues[i].SimulatedMilli = nil, nil
	}
	for _, g := range s.GPUs {
		for _, sh := range g.Shares {
			if sh.Use == nil || sh.Use.BusyMilli == nil || !sh.Use.Known() {
				continue
			}
			busy := *sh.Use.BusyMilli
			// seen stops a parent cycle (the queue tree refuses one; the
			// page must not hang on it either).
			seen := map[string]bool{}
			for name := sh.Queue; name != "" && !seen[name]; {
				seen[name] = true
				i, ok := byName[name]
				if !ok {
					break
				}
				q := &s.Queues[i]
				if sh.Use.Source == gpuuse.Measured {
					q.MeasuredMilli = addPtr(q.MeasuredMilli, busy)
				} else {
					q.SimulatedMilli = addPtr(q.SimulatedMilli, busy)
				}
				name = q.Parent
			}
		}
	}
}

func addPtr(p *int64, v int64) *int64 {
	n := v
	if p != nil {
		n += *p
	}
	return &n
}

// RequestText is a GPU request in words, as tessera queue's REQUEST column
// and the page's request column show it ("2x 0.5 GPU (limit 0.8) 20Gi (cap
// 40Gi) of H200|H100"): the burst limit and memory cap when they differ
// from the guarantee, the models when limited.
func RequestText(g request.GPU) string {
	if g.MIGProfile != "" {
		return fmt.Sprintf("%dx MIG %s", g.Count, g.MIGProfile)
	}
	s := fmt.Sprintf("%d GPU", g.Count)
	if g.ComputeMilli > 0 && g.ComputeMilli < request.Whole {
		s = fmt.Sprintf("%dx %s GPU", g.Count, quantity.FormatShare(g.ComputeMilli))
	}
	if g.ComputeLimitMilli > g.ComputeMilli {
		s += " (limit " + quantity.FormatShare(g.ComputeLimitMilli) + ")"
	}
	if g.MemoryMiB > 0 {
		s += " " + quantity.FormatMiB(g.MemoryMiB)
	}
	if g.MemoryLimitMiB > g.MemoryMiB {
		s += " (cap " + quantity.FormatMiB(g.MemoryLimitMiB) + ")"
	}
	if len(g.Models) > 0 {
		s += " of " + strings.Join(g.Models, "|")
	}
	return s
}

// QueueOf is a queue as the page shows it: its configuration q, whether an
// object or file configured it, what its workloads use, its fair-share
// position and its running and waiting workloads.
func QueueOf(q queueing.Queue, configured bool, used queueing.Resources, share float64, running, waiting int) Queue {
	return Queue{
		Name: q.Name, Parent: q.Parent, Configured: configured, Priority: q.Priority, Weight: q.Weight,
		GuaranteedMilli: q.Guaranteed.GPUMilli, GuaranteedMemoryMiB: q.Guaranteed.GPUMemoryMiB,
		LimitMilli: q.Limit.GPUMilli, LimitMemoryMiB: q.Limit.GPUMemoryMiB,
		UsedMilli: used.GPUMilli, UsedMemoryMiB: used.GPUMemoryMiB,
		Share: share, Running: running, Waiting: waiting,
	}
}

// workloadUse gives each running workload's GPUs their share's use: the
// share of that workload on the GPU of that index (a workload runs on one
// node, so its GPUs' indexes tell them apart).
func (s *Snapshot) workloadUse() {
	type key struct {
		workload string
		index    int
	}
	use := map[key]*gpuuse.Use{}
	for _, g := range s.GPUs {
		for _, sh := range g.Shares {
			if sh.Use != nil {
				use[key{sh.Workload, g.Index}] = sh.Use
			}
		}
	}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		for j := range w.GPUs {
			w.GPUs[j].Use = use[key{w.ID, w.GPUs[j].Index}]
		}
	}
}
