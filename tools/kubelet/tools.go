//go:build tools

// Package tools pins the kubelet that Tessera's real-node tests run, at the
// same Kubernetes version as the control plane in tools/kube. It is its own
// module so that adding it does not change tools/kube's cache key (the
// harness caches each binary under its module's go.mod and go.sum hash).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
