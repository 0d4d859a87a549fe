// Package gpuuse is the record of what a workload holds on a GPU beside
// what it uses: the booking (guarantee, burst limit, memory and its cap)
// and the use (busy fraction of the GPU over a window, memory in use, when
// it was measured), labelled by where the figure comes from (measured by
// NVML, simulated from a declared load, or not metered and why), and the
// idle-holder rule: use below a threshold for a configured time.
//
// One type family for every view and front door: the host daemon's API,
// tessera ps --gpus, tessera top and the dashboard read these records, and
// the node agent can publish them for the cluster. Tracker folds a node
// arbiter's readings into windows and tracks the idle rule on the clock
// of those readings. Pacer decides when a node's records are published
// (once per period, a large change sooner, never twice within a gap), on
// the times it is given.
//
// It is pure data and arithmetic: it must not import Kubernetes or host
// types, read devices or the clock, or decide what to do with an idle
// holder.
package gpuuse
