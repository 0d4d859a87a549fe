// Package client talks to a host daemon over its unix socket.
package client
