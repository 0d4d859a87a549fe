package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-gpu/tessera/hostd/contain"
	"github.com/tessera-gpu/tessera/internal/atomicfile"
)

// File names inside a job's folder.
const (
	SpecFile       = "spec.json"
	ExitFile       = "exit.json"
	StdoutFile     = "stdout.log"
	StderrFile     = "stderr.log"
	SupervisorFile = "supervisor.log"
)

// Spec is what the supervisor runs.
type Spec struct {
	Command []string `json:"command"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir,omitempty"`
	// StopGrace is how long the job has between the first SIGTERM or
	// SIGINT and SIGKILL; 0 means never escalate.
	StopGrace time.Duration `json:"stopGrace,omitempty"`
	// Contain says where the job's processes are kept (its cgroup and
	// environment mark): every one of them is ended before the exit is
	// recorded, and a daemon finds them from here if the supervisor dies.
	Contain contain.Job `json:"contain"`
	// Claim is the run's claim file (ClaimFile): the supervisor starts the
	// job only if it claims the run first. Empty: no claim (older specs).
	Claim string `json:"claim,omitempty"`
}

// Exit is the recorded outcome of a job.
type Exit struct {
	// Code is the exit code, 128+N when killed by signal N, 127 when the
	// command could not be started.
	Code     int       `json:"code"`
	Reason   string    `json:"reason"`
	Finished time.Time `json:"finished"`
}

// WriteJSON writes v to path atomically and durably (atomicfile.Write).
func WriteJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return atomicfile.Write(path, data, 0o600)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// ReadSpec returns the spec recorded in jobDir.
func ReadSpec(jobDir string) (Spec, error) {
	var s Spec
	if err := readJSON(filepath.Join(jobDir, SpecFile), &s); err != nil {
		return Spec{}, fmt.Errorf("read job spec: %w", err)
	}
	return s, nil
}

// ReadExit returns the recorded exit of the job in jobDir; ok is false when
// none was recorded.
func ReadExit(jobDir string) (e Exit, ok bool, err error) {
	err = readJSON(filepath.Join(jobDir, ExitFile), &e)
	if errors.Is(err, fs.ErrNotExist) {
		return Exit{}, false, nil
	}
	if err != nil {
		return Exit{}, false, fmt.Errorf("read exit status: %w", err)
	}
	return e, true, nil
}
