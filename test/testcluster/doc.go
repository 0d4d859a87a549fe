// Package testcluster starts a real Kubernetes control plane on loopback
// for integration tests: etcd and kube-apiserver built from their Go modules,
// and KWOK to fake GPU nodes and run bound pods.
//
// The binaries come from the separate tools modules under tools/ (so the main
// module stays light), built on first use and cached by test/toolbin, keyed
// by the pinned version and a hash of the tools module, so later runs start
// in seconds.
//
// Fault-injection tests also find here: stopping and starting the API
// server on the same etcd and port, compacting etcd so that watches expire,
// extra users (one identity per client in the audit log), an audit log, and
// processes started next to the control plane that a test can freeze or kill.
// Options turn on APIs behind feature gates (FeatureGates, RuntimeConfig).
//
// A real node is here too (StartRealNode): kubelet built from tools/cluster
// and containerd 2 built from tools/containerd (CDI on), with runc and the
// CNI plugins from the machine's packages, on a throwaway root,
// registered with the cluster, one per machine at a time (kubelet's
// device-plugin socket and port are fixed), and torn down to leave the
// machine as it was (containers, mounts, cgroups, sysctls, kubelet's fixed
// folders). Its containerd reads CDI specs from /etc/cdi, /var/run/cdi and
// the node's own RealNode.CDIDir. It needs root; RealNodeUnavailable says
// why it cannot run.
//
// Kueue's controller manager (StartKueue), built from tools/kueue with its
// CRDs read from that module in the module cache, queues Jobs in front of
// the scheduler under test; it needs root (a fixed certificate path).
//
// It is test infrastructure only: nothing outside tests may import it.
package testcluster
