//go:build !linux

package server

import (
	"errors"
	"net"
)

// peerUID is unknown off Linux: socket peers are then nobody (they may
// read, not submit or stop).
func peerUID(*net.UnixConn) (uint32, error) {
	return 0, errors.New("peer credentials: SO_PEERCRED is Linux only")
}
