// Package scheduler is Tessera's Kubernetes scheduler: pods that set
// schedulerName to Tessera's name are placed by the placement engine, their
// GPU assignment travels on the Binding (the API server copies its
// annotation tessera.io/assignment onto the pod as it binds it).
//
// It adapts Kubernetes to the engine: informers feed a cache, each cycle
// steps the cluster as booked (package booked: nodes by name, what each
// bound or assumed pod and allocated claim holds, exact accounting) with
// what changed since the last cycle (snapshot.go), so the engine's
// cluster and the policy's class index live on; standard pod
// constraints (readiness, nodeSelector, affinity, taints) narrow the nodes
// through k8s.io/component-helpers, and the engine decides. Pods that ask
// for no GPU are placed on CPU and memory alone and bound without an
// assignment. State lives only in the API server: a
// restarted scheduler rebuilds it from the assignment annotations of bound
// pods (and the specs of the others).
//
// Every decision between cycles is the scheduling core's (package
// dispatch): the pending pods' order, retry backoff, gangs, the bindings in
// flight, the reservation and how long a preemptor waits. This package
// feeds it (pending pods as items, informer events that may help, how each
// binding ended) and carries out what it returns: bindings, evictions, and
// for a pod that waits a PodScheduled=False condition and an event.
//
// A pod's DRA claims are resolved, allocated on the devices its placement
// chose, assumed and written by package kube/draclaims, called from the
// cycle's step (planFrom) and the binding; the snapshot books allocated
// claims (claims.go).
//
// After each cycle it publishes what the cycle decided from (View, in
// view.go) for the dashboard's cluster view (kube/clusterview).
//
// Beside the loop, packages of their own: a node's GPUs
// (kube/nodeinventory), a pod's gang and queue (kube/membership),
// conditions and events (kube/podstatus), CRD informers
// (kube/crdwatch), metrics (kube/schedmetrics), leader election
// (kube/leader).
//
// It must not decide (order, retry, reserve, preempt: package dispatch;
// place: packages cycle and placement) or translate request keys (package
// kube/workload).
package scheduler
