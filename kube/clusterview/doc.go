// Package clusterview is the cluster view of the web dashboard (package
// webui): a webui.Source over the Kubernetes scheduler's View, the state
// its last scheduling cycle decided from. The scheduler publishes each
// cycle's books and objects, as they are, on a Board (build.go), which
// translates them into the View types (view.go) when a reader asks; so the
// scheduler imports this package and never the other way round. The view
// then becomes a webui.Snapshot. Nothing here computes what the scheduler
// did not: each GPU's guaranteed allocation and memory booked are the
// core's books, each share is a pod's assignment, each queue's use and
// fair-share position the books' ledger, and each waiting pod's reason the
// words the scheduler wrote into its PodScheduled condition. So the page
// cannot disagree with the scheduler. Use beside booking (use.go) is the
// nodes' GPUUse objects (kube/nodeuse) as the agents last published them,
// read from the scheduler's informer when the view is read: each GPU's and
// each pod's busy fraction, memory in use and idle mark, labelled measured
// or simulated as published; a node without a GPUUse, or with one older
// than clusterinv.StaleUse, is not metered and says why. QueueUse
// (metrics.go) exports each queue's use, as the page sums it, to
// Prometheus at each scrape.
//
// It must not decide anything (no placement, queueing, fair-share or idle
// policy), call the API server, or keep state beyond the last cycle
// published.
package clusterview
