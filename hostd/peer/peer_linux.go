package peer

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// UID returns the uid of the process at the other end of a unix socket
// connection (SO_PEERCRED: as it was when it connected, or, on the
// connecting side, when the other end called listen).
func UID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		gerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	if gerr != nil {
		return 0, fmt.Errorf("peer credentials: SO_PEERCRED: %w", gerr)
	}
	return cred.Uid, nil
}
