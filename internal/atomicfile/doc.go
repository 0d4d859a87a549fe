// Package atomicfile replaces a file so that a crash at any moment leaves
// either the old content or the new, never a torn or empty file, and a
// replacement that returned survives a crash: the agent's checkpoint and
// MIG journal, the host daemon's supervisor files and the CDI spec are
// written through it. WriteIn does the same relative to an open folder
// (the host daemon's state folder, opened without following links by
// internal/safefs), and ReplaceIn without the syncs, for a file a crash
// may lose; IsTemp recognises a temporary file a crash left behind.
//
// It must not create folders (callers choose their permissions) nor know
// what the files hold.
package atomicfile
