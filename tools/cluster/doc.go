//go:build tools

// Package tools pins, in one module, every program Tessera's tests run
// beside its own code: etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager and kubelet (k8s.io/kubernetes), KWOK and Helm.
// One module means one version of each shared library (client-go, gRPC,
// protobuf), so a cold build compiles them once for all seven programs; the
// test harness (test/toolbin.Binary) builds them together with one
// `go build` and caches the binaries under the user cache directory, keyed
// by this module's go.mod and go.sum. It is a module of its own so the main
// module stays light.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
