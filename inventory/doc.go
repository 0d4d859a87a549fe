// Package inventory holds the plain data types that describe what a host
// has: nodes, their GPUs (model, memory, MIG state, health, NUMA placement)
// and the links between GPUs. Discovery backends produce these values; the
// placement engine, the node agent and show-gpus consume them.
//
// It is pure data with small helpers. It must not discover devices, talk to
// Kubernetes or make placement decisions.
package inventory
