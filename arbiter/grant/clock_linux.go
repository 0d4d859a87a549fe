package grant

import (
	"fmt"
	"syscall"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC, the heartbeat's clock.
const clockMonotonic = 1

// Monotonic returns CLOCK_MONOTONIC in nanoseconds, the clock the library
// compares heartbeats with.
func Monotonic() (uint64, error) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC): %w", errno)
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec), nil
}
