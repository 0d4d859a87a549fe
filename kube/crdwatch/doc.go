// Package crdwatch watches a custom resource that may not be installed:
// the informer starts once the API server serves the resource (looked up
// again every 30 seconds until then), so a cluster without the CRD sees
// no failing list calls; and Served, whether the API server serves a
// resource.
//
// It watches and reads only; it must not convert objects (the packages of
// the resources do: kube/queues, kube/podgroups, kube/gpunode) or decide.
package crdwatch
