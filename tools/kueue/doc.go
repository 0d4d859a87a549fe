//go:build tools

// Package tools pins Kueue (sigs.k8s.io/kueue), the job queueing
// controller that test/kueue puts in front of Tessera's scheduler. The
// test harness (test/toolbin.Binary, "kueue") builds Kueue's own
// manager command from this module and caches it under the user cache
// directory, keyed by this module's go.mod and go.sum; StartKueue reads
// Kueue's CRDs from this version in the module cache. It is a module of its
// own: Kueue's Kubernetes libraries are older than tools/cluster's, and
// the main module stays light.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
