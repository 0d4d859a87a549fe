// Package server serves the host daemon's local API: HTTP with JSON bodies
// over a unix socket (mode 0600 by default: whoever can open the socket can
// run commands as the daemon's user), plus Prometheus metrics at /metrics
// and a minimal status page at /.
package server
