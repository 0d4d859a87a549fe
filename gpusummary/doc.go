// Package gpusummary turns the catalog and a discovered inventory into the
// rows `tessera show-gpus` prints: one row per model with its memory, MIG
// support and, when an inventory is given, how many GPUs exist, how many are
// free and how much fractional capacity is left. Given the node pool of each
// node (a cluster's inventory), it also breaks the counts down per pool and
// model. Given each GPU's use (a host daemon's status), it adds use beside
// the counts: per GPU, and summed per model and pool with measured and
// simulated figures apart, never one number.
//
// It is pure: no discovery, no Kubernetes, no flags, no printing. Its Report
// type is the stable JSON/YAML schema of show-gpus.
package gpusummary
