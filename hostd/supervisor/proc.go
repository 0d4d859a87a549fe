package supervisor

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcStart returns the start time of pid (clock ticks since boot, field 22
// of /proc/PID/stat) and whether it is a zombie. ok is false when no such
// process exists.
func ProcStart(pid int) (start uint64, zombie, ok bool, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		// ESRCH: the process ended between the open and the read.
		if os.IsNotExist(err) || errors.Is(err, syscall.ESRCH) {
			return 0, false, false, nil
		}
		return 0, false, false, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
	}
	return parseStat(string(data))
}

// parseStat reads the state and start time from a /proc/PID/stat line. The
// command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStat(s string) (start uint64, zombie, ok bool, err error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false, false, fmt.Errorf("parse /proc stat: no ')' in %q", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, false, false, fmt.Errorf("parse /proc stat: %d fields after the name, want at least 20", len(f))
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false, false, fmt.Errorf("parse /proc stat start time %q: %w", f[19], err)
	}
	return start, f[0] == "Z" || f[0] == "X", true, nil
}

// Alive reports whether the process pid that started at start still runs
// (not a zombie, and not a different process that reused the pid).
func Alive(pid int, start uint64) (bool, error) {
	if pid <= 0 {
		return false, nil
	}
	s, zombie, ok, err := ProcStart(pid)
	if err != nil || !ok {
		return false, err
	}
	return s == start && !zombie, nil
}
