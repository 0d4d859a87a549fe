// Package jobenv builds the environment of a local job: the visible devices
// by UUID and the TESSERA_* variables the interception library reads, with
// the same names the node agent gives containers (docs/handoff.md), so a
// program sees the same environment on a single host and in a cluster.
package jobenv
