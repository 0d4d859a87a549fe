// Package dra is Tessera's device model for Kubernetes Dynamic Resource
// Allocation (resource.k8s.io/v1): the driver name, how a node's GPUs are
// published as devices (attributes, consumable capacity for compute and
// memory shares, taints for unhealthy GPUs), the DeviceClasses that select
// them (whole GPUs, shares, and the extended-resource mapping that lets
// pods keep asking for tessera.io/gpu), and the opaque configuration that
// carries what DRA's capacity cannot say: a share's burst limits.
//
// The translation goes both ways and is pure: Devices and Resources turn
// an inventory.Node into the devices of its pool (for the resourceslice
// helper of k8s.io/dynamic-resource-allocation, which writes the
// ResourceSlices); ShareConfig decodes and checks a claim's configuration.
//
// Allocate computes a claim's allocation on the devices the scheduler's
// policy chose, with Kubernetes' structured allocator (no API calls), and
// NewAllocatedState reads what allocated claims hold.
//
// It must not publish, watch, write or prepare anything: the node agent
// publishes and prepares (its kubelet plugin), the scheduler decides where
// and writes the allocation.
// docs/dra.md says what Kubernetes v1.37 offers and how Tessera maps onto it.
package dra
