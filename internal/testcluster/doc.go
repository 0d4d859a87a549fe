// Package testcluster starts a real Kubernetes control plane on loopback
// for integration tests: etcd and kube-apiserver built from their Go modules,
// and KWOK to fake GPU nodes and run bound pods.
//
// The binaries come from the separate tools modules under tools/ (so the main
// module stays light). They are built on first use and cached under the user
// cache directory, keyed by the pinned version and a hash of the tools
// module, so later runs start in seconds.
//
// It is test infrastructure only: nothing outside tests may import it.
package testcluster
