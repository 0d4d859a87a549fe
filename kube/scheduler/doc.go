// Package scheduler is Tessera's Kubernetes scheduler for the pods that
// name it: the scheduling core (package dispatch) decides, this package
// translates Kubernetes in and carries the decisions out. A pod's GPU
// assignment travels on its Binding (the API server copies the annotation
// tessera.io/assignment onto the pod), so state lives only in the API
// server: a restarted scheduler rebuilds it from bound pods.
//
// In: informer events mark what changed (requeue.go, pods.go); each
// cycle steps the core's books (package booked) with the marked nodes,
// pods and DRA claims (snapshot.go, pods.go) and hands the core the
// waiting pods as items, translated into cycle workloads when it asks
// (translate.go: requests, the pod's policy, node constraints through
// k8s.io/component-helpers, sharing rules, and for the pods they concern
// kube-scheduler's own hard-constraint plugins through kube/kubefilter,
// which its informers feed). Out (serve.go):
// plans made in the cycle's step, bindings (package kube/podbind) with
// their claims (package kube/draclaims), evictions, and for a pod that
// waits a PodScheduled=False condition and an event (kube/podstatus).
// After each cycle it publishes what the cycle decided from for the
// cluster view (kube/clusterview).
//
// Packages of its own beside the loop: a node's GPUs (kube/nodeinventory),
// a pod's gang and queue (kube/membership), CRD informers (kube/crdwatch),
// metrics (kube/schedmetrics), leader election (kube/leader).
//
// It must not decide (order, retry, reserve, preempt: package dispatch;
// place: packages cycle and placement) or translate request keys (package
// kube/workload).
package scheduler
