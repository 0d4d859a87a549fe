// Package usepub publishes a node's GPU use for the cluster (issue 37):
// it builds the node's use records (package gpuuse: each pod's booking of
// each GPU beside its use window from the node arbiter, measured, or
// simulated on simulated GPUs, or not metered and why; the idle mark) and
// hands them to a Sink (agent/kube's UsePublisher writes the node's GPUUse)
// when a gpuuse.Pacer says they are due, on the clock it is given.
//
// It must not talk to the API server itself, measure anything, or decide
// what to do with an idle holder.
package usepub
