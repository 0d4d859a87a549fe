// Package binding defines the assignment record that travels from the
// placement decision to the node: which GPUs (by UUID) each container of a
// workload gets and with which guaranteed and limit shares, and for a MIG
// instance where it lies (an existing instance, or one the node must
// create at a start slot). The Kubernetes
// scheduler writes it on the pod as it binds it, the host daemon keeps it
// with the job, and the node agent reads it to configure the container.
//
// It is pure data with a versioned JSON encoding and validation. It must not
// import Kubernetes, decide placements or touch devices.
package binding
