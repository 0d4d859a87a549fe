package cli

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/webui"
)

// A job whose command holds a newline, an OSC title and a CSI clear
// (real daemon, real job processes): tessera ps, queue and the logs
// header print one line per job with the characters escaped, never an
// ESC or BEL byte; ps -o json and the job's own output keep the bytes.
func TestHostileCommandIsEscaped(t *testing.T) {
	host := startUp(t, "1xH100").host
	script := "#\x1b]0;pwn\x07\x1b[2J\n#\n1234 fake-row running default\nprintf 'out\\033[2J\\n'; exec sleep 300"
	var ids []string
	for range 2 { // one runs, one waits for the GPU
		code, out, errs := tessera(append(append([]string{"run", "--detach"}, host...), "--", "sh", "-c", script, "sh", "\x1b[31m")...)
		if code != 0 {
			t.Fatalf("run --detach: %d %s", code, errs)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	t.Cleanup(func() {
		tessera(append([]string{"stop", ids[0], ids[1]}, host...)...)
		waitForState(t, host, ids[0], api.Stopped)
	})
	waitForOutput(t, host, ids[0], "out")

	code, out, errs := tessera(append([]string{"ps"}, host...)...)
	if code != 0 {
		t.Fatalf("ps: %d %s", code, errs)
	}
	terminalSafe(t, "ps", out, 1+2)
	if want := `#\x1b]0;pwn\a\x1b[2J\n#\n1234 fake-row`; !strings.Contains(out, want) {
		t.Errorf("ps lacks the escaped command %q:\n%s", want, out)
	}
	code, out, errs = tessera(append([]string{"queue"}, host...)...)
	if code != 0 {
		t.Fatalf("queue: %d %s", code, errs)
	}
	terminalSafe(t, "queue", out, 1+1)
	code, _, errs = tessera(append([]string{"logs", ids[1]}, host...)...)
	if code != 1 {
		t.Errorf("logs on the queued job: exit %d, want 1", code)
	}
	terminalSafe(t, "logs header", errs, 1)

	// The job's output and -o json keep the bytes as they are.
	if _, out, _ := tessera(append([]string{"logs", ids[0]}, host...)...); out != "out\x1b[2J\n" {
		t.Errorf("logs %s: %q, want the job's output as it is", ids[0], out)
	}
	for _, j := range psJobs(t, host) {
		if len(j.Command) != 5 || j.Command[2] != script || j.Command[4] != "\x1b[31m" {
			t.Errorf("ps -o json: %s's command %q, want the script and argument as submitted", j.ID, j.Command)
		}
	}
}

// fakeDaemon serves the daemon's API on a socket with strings no real
// daemon would send (a program posing as the daemon, or a daemon with a
// bug): control characters in every string and in error messages.
func fakeDaemon(t *testing.T, evil string) []string {
	t.Helper()
	dir := t.TempDir()
	socket := filepath.Join(dir, "api.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	running := api.Job{ID: "job-1" + evil, State: api.Running, Queue: evil, Command: []string{"/bin/sh", evil}, Submitted: now,
		Preempt: &api.Preemption{By: evil, Kind: evil}}
	queued := api.Job{ID: "job-2" + evil, State: api.Queued, Queue: evil, Command: []string{evil}, Submitted: now}
	failed := api.Job{ID: "job-3" + evil, State: api.Failed, Reason: evil, Submitted: now}
	reply := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, 200, []api.Job{running, queued, failed})
	})
	mux.HandleFunc("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "job-2":
			reply(w, 200, queued)
		case "job-3":
			reply(w, 200, failed)
		default:
			reply(w, 500, api.Error{Error: "no such thing\n" + evil})
		}
	})
	mux.HandleFunc("POST /v1/jobs/{id}/stop", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, 500, api.Error{Error: "cannot stop\n" + evil})
	})
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var req api.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Queue == "bad" {
			reply(w, 400, api.Error{Error: "queue: must be good\n" + evil, Field: "queue"})
			return
		}
		reply(w, 200, queued)
	})
	mux.HandleFunc("GET /v1/queue", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, 200, []api.QueueEntry{{Position: 1, ID: queued.ID, Queue: evil, Request: evil, Reason: evil}})
	})
	mux.HandleFunc("GET /v1/queues", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, 200, []api.QueueStatus{{Name: evil, Parent: evil}})
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, 200, api.Status{Source: evil, GPUs: []api.GPUStatus{{UUID: evil, Model: evil, Jobs: []string{evil}}}})
	})
	mux.HandleFunc("GET /ui/api/snapshot", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, 200, webui.Snapshot{Scope: "host", Title: evil, Source: evil, Time: now, Notes: []string{evil},
			Workloads: []webui.Workload{{ID: evil, State: webui.StateQueued, Queue: evil, Request: evil, Reason: evil, Command: evil, Submitted: now}}})
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return []string{"--state-dir", dir, "--socket", socket}
}

// Whatever strings the daemon answers, every table, note and error
// message the CLI prints keeps one line per row or message and no
// control character: ps, ps --gpus, queue, queue --queues, top --once,
// the logs header, stop and run's messages.
func TestDaemonStringsAreEscaped(t *testing.T) {
	const evil = "\n1234 fake-row\r\x1b]0;pwn\x07\x1b[2J\u009b31m\x7f\xff"
	host := fakeDaemon(t, evil)
	tests := []struct {
		name                     string
		args                     []string
		code, outLines, errLines int
		want                     string // in stdout or stderr
	}{
		{"ps", []string{"ps", "-a"}, 0, 1 + 3, 0, `job-1\n1234 fake-row\r\x1b]0;pwn\a\x1b[2J\u009b31m\x7f`},
		{"ps --gpus", []string{"ps", "--gpus"}, 0, 1 + 1 + 2, 0, `Inventory: \n1234 fake-row`},
		{"queue", []string{"queue"}, 0, 1 + 1, 0, `\x1b]0;pwn\a`},
		{"queue --queues", []string{"queue", "--queues"}, 0, 1 + 1, 0, `\x1b[2J`},
		{"logs header of a queued job", []string{"logs", "job-2"}, 1, 0, 1, `(position 1: \n1234 fake-row`},
		{"logs -f header of a queued job", []string{"logs", "-f", "job-2"}, -1, -1, -1, `tessera: job-2\n1234 fake-row`},
		{"logs of a job that never started", []string{"logs", "job-3"}, 1, 0, 1, `never started (failed: \n1234 fake-row`},
		{"daemon error", []string{"logs", "job-9"}, 1, 0, 1, `no such thing\n\n1234 fake-row`},
		{"stop error", []string{"stop", "job-1", "job-2"}, 1, 0, 2, `cannot stop\n\n1234 fake-row`},
		{"run refused", []string{"run", "--queue", "bad", "--", "true"}, 2, 0, 1, `--queue: must be good\n\n1234 fake-row`},
		{"run -d prints the job ID", []string{"run", "-d", "--", "true"}, 0, 1, 0, `job-2\n1234 fake-row`},
		{"top --once", []string{"top", "--once"}, 0, -1, 0, `\x1b]0;pwn\a`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append(tt.args[:1:1], host...), tt.args[1:]...)
			code, out, errs := tessera(args...)
			if tt.code >= 0 && code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, errs)
			}
			if !strings.Contains(out+errs, tt.want) {
				t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", tt.want, out, errs)
			}
			for _, o := range []struct {
				name, text string
				lines      int
			}{{"stdout", out, tt.outLines}, {"stderr", errs, tt.errLines}} {
				switch {
				case o.lines < 0 && o.text != "": // as many lines as it takes
					terminalSafe(t, o.name, o.text, strings.Count(o.text, "\n"))
				case o.lines >= 0:
					terminalSafe(t, o.name, o.text, o.lines)
				}
			}
		})
	}
}
