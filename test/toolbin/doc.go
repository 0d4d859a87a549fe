// Package toolbin builds and caches the programs the tests run beside
// Tessera's own code, from the pinned tools modules: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, KWOK and helm from
// tools/cluster; containerd, its runc shim and ctr from tools/containerd;
// Kueue from tools/kueue. A module's missing programs are built with one
// `go build` (static, CGO_ENABLED=0, no symbols or DWARF) into a cache
// keyed by the pinned versions, go.mod, go.sum and the Go version; callers
// in several processes at once build once (a file lock).
//
// It owns only building and finding those binaries: it must not start
// them (test/testcluster does) and imports nothing outside the standard
// library. It is test infrastructure only: nothing outside tests may
// import it.
package toolbin
