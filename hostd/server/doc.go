// Package server serves the host daemon's local API: HTTP with JSON bodies
// over a unix socket (mode 0600 by default: whoever can open the socket can
// run commands as the daemon's user; PrepareSocketDir makes its folder
// match --socket-mode) and, with --http, over loopback TCP, plus
// Prometheus metrics at /metrics and the web dashboard at / (package webui,
// read from the daemon's own queries in ui.go; docs/dashboard.md).
//
// Every request passes a guard (guard.go): over TCP its Host must name the
// daemon (no DNS rebinding) and calls that change anything need the API
// token (EnsureToken); on either listener a cross-site Origin and a
// non-JSON POST body are refused. Jobs belong to the uid that submitted
// them (the socket peer's, by SO_PEERCRED through ConnContext, or the
// daemon's with the token): only the owner, the daemon's user and root
// see a job's whole environment and output, or stop it. A job's output is
// read without following links (internal/safefs): a log or job folder
// replaced by a link is refused, saying so. CheckSocketPath refuses a
// socket path too long for a unix socket.
package server
