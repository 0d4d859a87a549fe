// Package client talks to a host daemon: over its unix socket (New; the
// socket's file mode is the access control), or over TCP to a daemon
// started with --http (NewHTTP; loopback only, with the API token, see
// api.TokenFile). Snapshot reads the web dashboard's JSON (package webui)
// for tessera top.
package client
