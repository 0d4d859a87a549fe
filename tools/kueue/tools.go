//go:build tools

// Package tools pins Kueue for the tests that put it in front of Tessera.
// The harness builds Kueue's own manager command from this module
// (test/testcluster's knownTools); the import keeps the requirement.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
