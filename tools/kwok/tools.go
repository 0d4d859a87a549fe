//go:build tools

// Package tools pins KWOK (sigs.k8s.io/kwok), which fakes GPU nodes and moves
// bound pods to Running in Tessera's integration tests. It is a separate
// module so the main module stays light; the test harness builds the binary
// from here and caches it under the user cache directory, keyed by version.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
