// Package nodeuse owns the GPUUse custom resource (tessera.io/v1alpha1,
// cluster-scoped, one per node, named after it): its CRD manifest, the
// GroupVersionResource, and the conversion between a GPUUse object and
// the node's use records (package gpuuse) in both directions. The node
// agent writes GPUUses; the views read them. The scheduler watches them
// for its cluster view only, with no event handler, so a use write never
// wakes its loop.
//
// It converts and installs only; it must not publish on a schedule, watch
// or decide anything.
package nodeuse
