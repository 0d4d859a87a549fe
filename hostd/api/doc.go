// Package api holds the JSON types of the host daemon's local API, shared
// by the daemon's HTTP server and its client. Paths are versioned (/v1/...).
package api
