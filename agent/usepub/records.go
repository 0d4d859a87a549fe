package usepub

import (
	"fmt"
	"sort"
	"time"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
)

// Node is what the records are built from.
type Node struct {
	Inventory   inventory.Node
	Allocations []checkpoint.Entry
	// Seats are the node arbiter's seats after its last step; Window,
	// Rule and Metered how it makes their use (arbiter.UseRule).
	Seats   []arbiter.SeatStatus
	Window  time.Duration
	Rule    gpuuse.IdleRule
	Metered bool
	// MPS: NVIDIA MPS shares the GPUs and nothing measures time.
	MPS bool
	// MemoryMiB is each seat's memory in use, by allocation key and seat
	// GPU (the interception library's accounting); nil when the
	// containers run without the library.
	MemoryMiB map[[2]string]int64
	// SimMemoryMiB is each allocation's declared memory on simulated GPUs
	// (its load), by key; shown only with a simulated busy figure.
	SimMemoryMiB map[string]int64
}

// Records returns the node's use records at at: every GPU with one share
// per pod holding it (a pod's containers on one GPU summed) and their sums.
func Records(n Node, at time.Time) nodeuse.Status {
	st := nodeuse.Status{Source: n.Inventory.Source, At: at,
		Rule: nodeuse.Rule{WindowSeconds: n.Window.Seconds(), IdleBelowMilli: n.Rule.BelowMilli, IdleAfterSeconds: n.Rule.After.Seconds(), Metered: n.Metered && !n.MPS}}
	seats := make(map[[2]string]arbiter.SeatStatus, len(n.Seats))
	for _, s := range n.Seats {
		seats[[2]string{s.Key, s.GPU}] = s
	}
	byGPU := map[string]int{}
	for _, g := range n.Inventory.GPUs {
		byGPU[g.UUID] = len(st.GPUs)
		st.GPUs = append(st.GPUs, gpuuse.GPU{GPU: g.UUID, Index: g.Index})
	}
	// Each container's share, grouped by pod and GPU.
	type podGPU struct{ pod, gpu string }
	parts := map[podGPU][]gpuuse.Share{}
	for _, e := range n.Allocations {
		pod := e.Namespace + "/" + e.Pod
		for _, sh := range e.GPUs {
			uuid := sh.UUID
			if sh.MIG != nil && sh.MIG.GPU != "" {
				uuid = sh.MIG.GPU
			}
			if _, ok := byGPU[uuid]; !ok {
				continue
			}
			rec := gpuuse.Share{Workload: pod, GPU: uuid, Index: sh.Index,
				Booked: gpuuse.Booked{GuaranteedMilli: sh.ComputeMilli, LimitMilli: max(sh.ComputeLimitMilli, sh.ComputeMilli),
					MemoryMiB: sh.MemoryMiB, MemoryLimitMiB: max(sh.MemoryLimitMiB, sh.MemoryMiB)}}
			seat, seated := seats[[2]string{e.Key, sh.UUID}]
			switch {
			case n.MPS:
				rec.Use = gpuuse.NotMetered("NVIDIA MPS shares this GPU and nothing measures its clients' time")
			case !seated && sh.MIGProfile != "":
				rec.Use = gpuuse.NotMetered("a MIG instance: the node arbiter does not seat it")
			case !seated:
				rec.Use = gpuuse.NotMetered("the container holds no seat with the node arbiter")
			case !n.Metered:
				rec.Use = gpuuse.NotMetered("no GPU utilisation meter (NVML could not be opened)")
			case seat.Use.Known():
				rec.Use, rec.Idle = seat.Use, seat.Idle
			default:
				rec.Use = gpuuse.Use{Source: gpuuse.None, Reason: fmt.Sprintf("not measured yet: the first window closes within %v of the start", n.Window)}
			}
			switch mem, ok := n.SimMemoryMiB[e.Key]; {
			case rec.Use.Source == gpuuse.Simulated && ok:
				rec.Use.MemoryUsedMiB = &mem
			case rec.Use.Source != gpuuse.Simulated && n.MemoryMiB != nil && seated:
				if m, ok := n.MemoryMiB[[2]string{e.Key, sh.UUID}]; ok {
					rec.Use.MemoryUsedMiB = &m
				}
			}
			k := podGPU{pod, uuid}
			parts[k] = append(parts[k], rec)
		}
	}
	keys := make([]podGPU, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].pod < keys[j].pod })
	for _, k := range keys {
		g := &st.GPUs[byGPU[k.gpu]]
		g.Shares = append(g.Shares, merge(parts[k]))
	}
	for i := range st.GPUs {
		st.GPUs[i].Sum("no pod holds it")
	}
	return st
}

// merge sums one pod's containers on one GPU: bookings and use add up
// (gpuuse.GPU.Sum), and the pod is idle only when all of them are, since
// the latest of their idle marks.
func merge(parts []gpuuse.Share) gpuuse.Share {
	if len(parts) == 1 {
		return parts[0]
	}
	g := gpuuse.GPU{Shares: parts}
	g.Sum("")
	out := gpuuse.Share{Workload: parts[0].Workload, GPU: parts[0].GPU, Index: parts[0].Index, Booked: g.Booked, Use: g.Use}
	for i, p := range parts {
		switch {
		case p.Idle == nil:
			out.Idle = nil
			return out
		case i == 0 || p.Idle.Since.After(out.Idle.Since):
			out.Idle = &gpuuse.Idle{Since: p.Idle.Since}
		}
	}
	return out
}
