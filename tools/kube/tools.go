//go:build tools

// Package tools pins the Kubernetes control-plane binaries that Tessera's
// integration tests run (kube-apiserver, kube-scheduler). It is a separate
// module so the main module stays light; the test harness builds the
// binaries from here and caches them under the user cache directory, keyed
// by this module's version of k8s.io/kubernetes.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
