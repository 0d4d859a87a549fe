// Package handoff decides what one container gets when kubelet allocates
// Tessera devices for it, and how that is told to the container.
//
// It owns the node's device IDs (per-GPU slots, see slots.go), the matching
// of a kubelet Allocate call to the pod container it is for (resolve.go),
// the allocation key that names a container's enforcement state (key.go), and
// the environment, mounts and CDI devices handed to the container (env.go).
// docs/handoff.md explains the design and why it is correct when several
// pods with identical requests start on one node at once.
//
// It is pure: it must not do I/O, talk to kubelet or the API server, or keep
// state between calls. The agent package feeds it what those report.
package handoff
