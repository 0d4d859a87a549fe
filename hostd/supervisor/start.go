package supervisor

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/tessera-gpu/tessera/internal/safefs"
)

// Start writes spec into jobDir and starts a supervisor for it: argv (the
// supervisor command, e.g. [tessera supervise]) with jobDir appended, in a
// new session, with its own output going to JOBDIR/supervisor.log. The
// caller must Wait on the returned command (it is the daemon's child) or
// leave it to be reaped after the daemon exits.
func Start(argv []string, jobDir string, spec Spec) (*exec.Cmd, uint64, error) {
	if len(argv) == 0 {
		return nil, 0, fmt.Errorf("start supervisor: empty supervisor command")
	}
	jobs := filepath.Dir(filepath.Clean(jobDir))
	if err := safefs.MkdirAll(jobs, filepath.Base(jobDir), 0o700); err != nil {
		return nil, 0, fmt.Errorf("start supervisor: %w", err)
	}
	if err := WriteJSON(filepath.Join(jobDir, SpecFile), spec); err != nil {
		return nil, 0, fmt.Errorf("start supervisor: %w", err)
	}
	log, err := openLog(jobDir, SupervisorFile)
	if err != nil {
		return nil, 0, fmt.Errorf("start supervisor: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(argv[0], append(argv[1:], jobDir)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start supervisor %s: %w", argv[0], err)
	}
	start, _, _, err := ProcStart(cmd.Process.Pid)
	if err != nil {
		return cmd, 0, fmt.Errorf("read supervisor start time: %w", err)
	}
	return cmd, start, nil
}
