// Package clusterview is the cluster view of the web dashboard (package
// webui): a webui.Source over the Kubernetes scheduler's View, the state
// its last scheduling cycle decided from. It owns the View types (view.go),
// which kube/scheduler fills and publishes, so the scheduler imports this
// package and never the other way round. It translates that view into a
// webui.Snapshot and computes nothing the scheduler did not: each GPU's
// guaranteed allocation and memory booked are placement's own books, each
// share is a pod's assignment, each queue's use and fair-share position the
// scheduler's ledger, and each waiting pod's reason the words the scheduler
// wrote into its PodScheduled condition. So the page cannot disagree with
// the scheduler.
//
// It must not decide anything (no placement, queueing or fair-share
// policy), call the API server, or keep state between snapshots.
package clusterview
