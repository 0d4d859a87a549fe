// Package testcluster starts a real Kubernetes control plane on loopback
// for integration tests: etcd and kube-apiserver built from their Go modules,
// and KWOK to fake GPU nodes and run bound pods.
//
// The binaries come from the separate tools modules under tools/ (so the main
// module stays light). They are built on first use and cached under the user
// cache directory, keyed by the pinned version and a hash of the tools
// module, so later runs start in seconds.
//
// Fault-injection tests also find here: stopping and starting the API
// server on the same etcd and port, compacting etcd so that watches expire,
// extra users (one identity per client in the audit log), an audit log, and
// processes started next to the control plane that a test can freeze or kill.
//
// It is test infrastructure only: nothing outside tests may import it.
package testcluster
