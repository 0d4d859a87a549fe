//go:build tools

// Package tools pins containerd (github.com/containerd/containerd/v2) for
// the tests' real node: the daemon, its runc shim and ctr. The test harness
// (test/toolbin.Binary) builds the three with one `go build`
// (CGO_ENABLED=0, so static; tag no_btrfs leaves out the btrfs snapshotter,
// which needs cgo) and caches them under the user cache directory, keyed by
// this module's go.mod and go.sum. runc itself still comes from the
// machine's packages.
//
// It is a module of its own, not part of tools/cluster: containerd's
// requirements would raise libraries kubelet is built with (the CRI client,
// OpenTelemetry, ...) and so change, and rebuild, every control-plane
// binary.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
