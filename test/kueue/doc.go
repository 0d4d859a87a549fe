// Package kueue tests Kueue in front of Tessera: Kueue's own controller
// manager (built from the version tools/kueue pins) admits Jobs against a
// ClusterQueue's quota of Tessera GPUs, and Tessera's scheduler places the
// pods of the Jobs it admitted on KWOK GPU nodes; Tessera's admission
// webhook, served on loopback, writes tessera.io/gpu-milli into the Jobs'
// templates. The control plane is
// test/testcluster's; Kueue is started by testcluster.StartKueue.
//
// It holds tests only: no product code imports it, and it must not hold
// helpers other packages need (those go to test/testcluster).
package kueue
