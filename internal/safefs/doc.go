// Package safefs keeps a root-run host daemon's state folder from being
// turned against it: a folder another user may change, or a link in it,
// would let that user point the daemon's writes (job output, exit status,
// records) at a file of their choosing, or have it stream one to a client.
//
// CheckStateDir refuses a state folder (and the job folder a supervisor is
// given) that is not owned by the process's effective user or is writable
// by its group or others, and one with a parent that another user could
// rename it from under (a parent owned by a user other than root and this
// one, or writable by group or others without the sticky bit), as ssh
// does for authorized_keys paths; its message names the folder, its owner
// and mode, and what to run. PrepareStateDir creates a missing state
// folder owner-only first.
//
// Under such a root every file and folder is opened by name relative to
// it, and never through a symbolic link or "..": openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it, else a walk
// of openat(O_NOFOLLOW) calls, one component at a time. MkdirAll and
// OpenDir also refuse a folder on the way that is not the effective
// user's own or is writable by group or others. A link met on the way is
// an error wrapping ErrLink that names it.
//
// It owns how files under a state folder are opened, not what they hold
// nor where they are (callers name them), and it never changes the mode
// or owner of what it finds.
package safefs
