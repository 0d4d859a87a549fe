// Package statefile reads and writes the versioned JSON state files the
// node keeps across restarts: the agent's checkpoint (agent/checkpoint),
// the MIG journal (migctl) and the DRA claim journal (agent/dra).
//
// It owns the strict read and the durable write those files share. A Format
// names one kind of file and the one version of it that is written and
// understood. Load tells a missing file apart (nothing found, no error) and
// refuses, naming the file, one that is damaged (not JSON, or anything
// after the value), of another version (naming the version found and the
// one understood; the version is checked before the rest, so a newer file
// says so rather than fail on a field it added) or holding a field the Go
// type does not have, and one that is a symbolic link. Save checks the
// value carries the version, encodes it indented with a final newline and
// replaces the file through internal/atomicfile, so a crash or a failed
// Save leaves the old file whole.
//
// It must not know what the files hold (the callers validate their
// entries and check which node a file belongs to), create folders (the
// callers choose their permissions), or migrate one version to another.
package statefile
