// Package libinstall installs the CUDA interception library on a node: a
// versioned folder per library (its version and the first 12 hex digits of
// its sha256), written to a temporary name, synced and renamed, and a
// stable symlink switched to it atomically, older folders pruned. The
// agent's init container runs it (tessera install-lib) and the agent hands
// containers the versioned file the symlink names.
//
// It owns the folder layout and its atomicity; it must not know flags or
// containers (cmd/tessera/cli and agent/handoff do).
package libinstall
