// Package peer reads who is at the other end of a unix socket connection
// (SO_PEERCRED): the daemon uses it to know which user submits, and the
// client to check that the daemon behind a socket is one it may trust.
// It reads credentials only; what they allow is decided by its callers.
package peer
