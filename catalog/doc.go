// Package catalog is Tessera's table of GPU and accelerator models: one entry
// per model with its datasheet figures (memory, SMs, interconnect) and its MIG
// profiles, compiled into the binary.
//
// Adding a model means adding one entry to the table in models_*.go; every
// lookup, alias match and suggestion is derived from that table.
//
// The package owns model facts only. It must not discover devices, hold
// inventory state or know about Kubernetes.
package catalog
