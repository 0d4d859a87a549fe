// Package checkpoint keeps the node's container allocations on disk so an
// agent restart keeps every running container's assignment: which devices
// kubelet gave it, which pod container it is, and its GPU shares.
//
// The file is JSON with a version, read and written through
// internal/statefile: Save writes it atomically (a temporary file in the
// same folder, fsync, rename, fsync of the folder), so a crash leaves
// either the old or the new file. Load rejects files it does not
// understand (damaged, another version, a field it does not know, an
// invalid entry) rather than guess.
//
// It must not decide allocations or talk to kubelet; the agent package
// does.
package checkpoint
