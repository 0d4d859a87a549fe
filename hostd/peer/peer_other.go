//go:build !linux

package peer

import (
	"errors"
	"net"
)

// ErrUnsupported is returned off Linux, where SO_PEERCRED is missing.
var ErrUnsupported = errors.New("peer credentials: SO_PEERCRED is Linux only")

// UID is unknown off Linux: socket peers are then nobody to the daemon
// (they may read, not submit or stop).
func UID(*net.UnixConn) (uint32, error) { return 0, ErrUnsupported }
