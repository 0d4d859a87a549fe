// Package mpstest provides a fake nvidia-cuda-mps-control for tests: a
// shell script that records the environment it was started with and the
// commands it receives on its control pipe.
package mpstest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// script is the fake nvidia-cuda-mps-control. "-d" records the
// environment it was started with and creates the control pipe (a plain
// file here); without arguments it records every command read from stdin,
// answers the health command and removes the pipe on quit, and fails like
// the real one when no daemon runs. A file fail-start in the pipe folder
// makes "-d" fail; a file answer replaces the health command's answer. Everything is logged to fake.log in the log folder.
const script = `#!/bin/sh
log="$CUDA_MPS_LOG_DIRECTORY/fake.log"
ctl="$CUDA_MPS_PIPE_DIRECTORY/control"
case "$1" in
-d)
	if [ -e "$CUDA_MPS_PIPE_DIRECTORY/fail-start" ]; then
		echo "start-failed" >>"$log"
		echo "fake: cannot start" >&2
		exit 1
	fi
	if [ -e "$ctl" ]; then
		echo "An instance of this daemon is already running" >&2
		exit 1
	fi
	echo "start visible=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY inherited=$FAKE_INHERITED" >>"$log"
	: >"$ctl"
	;;
"")
	if [ ! -e "$ctl" ]; then
		echo "Cannot find MPS control daemon process" >&2
		exit 1
	fi
	while IFS= read -r line; do
		echo "cmd $line" >>"$log"
		case "$line" in
		quit) rm -f "$ctl" ;;
		get_default_active_thread_percentage)
			if [ -e "$CUDA_MPS_PIPE_DIRECTORY/answer" ]; then cat "$CUDA_MPS_PIPE_DIRECTORY/answer"; else echo "100.0"; fi
			;;
		esac
	done
	;;
*)
	echo "fake: bad arguments: $*" >&2
	exit 2
	;;
esac
`

// Write writes the fake control program into a new temporary folder as
// nvidia-cuda-mps-control and returns its path, for mps.Config.Binary or
// to put first on PATH.
func Write(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvidia-cuda-mps-control")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// Log returns what the fake recorded for the daemon whose log folder is
// logDir, one entry a line, leaving out the supervisor's health checks
// ("cmd get_default_active_thread_percentage"):
//
//	start visible=<CUDA_VISIBLE_DEVICES> pipe=<pipe dir> log=<log dir> inherited=<FAKE_INHERITED>
//	start-failed
//	cmd <a line read on the control pipe>
func Log(t testing.TB, logDir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(logDir, "fake.log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" && l != "cmd get_default_active_thread_percentage" {
			out = append(out, l)
		}
	}
	return out
}

// Kill makes the daemon whose pipe folder is pipeDir stop answering, as if
// it had died.
func Kill(t testing.TB, pipeDir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(pipeDir, "control")); err != nil {
		t.Fatal(err)
	}
}

// Running reports whether the daemon whose pipe folder is pipeDir answers.
func Running(pipeDir string) bool {
	_, err := os.Stat(filepath.Join(pipeDir, "control"))
	return err == nil
}

// RefuseStart makes "-d" fail for pipeDir (refuse true) or work again.
func RefuseStart(t testing.TB, pipeDir string, refuse bool) {
	t.Helper()
	path := filepath.Join(pipeDir, "fail-start")
	if !refuse {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(pipeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Adopt leaves a fake daemon running for pipeDir, as an earlier agent would.
func Adopt(t testing.TB, pipeDir string) {
	t.Helper()
	if err := os.MkdirAll(pipeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pipeDir, "control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ShortDir returns a new temporary folder with a short path, for
// mps.Config.Root: t.TempDir's names are long, and pipe folders are limited.
func ShortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Answer makes the daemon whose pipe folder is pipeDir answer the health
// command (get_default_active_thread_percentage) with text.
func Answer(t testing.TB, pipeDir, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(pipeDir, "answer"), []byte(text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
