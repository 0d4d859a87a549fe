// Package gpunode owns the GPUNode custom resource (tessera.io/v1alpha1,
// cluster-scoped, one per node): its CRD manifest, the GroupVersionResource,
// and the conversion between a GPUNode object and inventory.Node in both
// directions. The node agent writes GPUNodes; the scheduler reads them.
//
// It converts and installs only; it must not publish on a schedule, watch or
// decide anything.
package gpunode
