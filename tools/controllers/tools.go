//go:build tools

// Package tools pins kube-controller-manager, which the real-node tests run
// for workload objects (DaemonSets, Deployments, service accounts). It is a
// module of its own, at the same k8s.io/kubernetes version as tools/kube, so
// that adding it did not change the cache key of the API server's build; the
// test harness builds it from here and caches it by that version.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
