package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/quantity"
)

// screenRow is the line of a tessera top frame whose first cell is first.
func screenRow(screen, first string) string {
	for _, l := range strings.Split(screen, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			return l
		}
	}
	return ""
}

// `tessera top --once` against a real daemon on simulated GPUs, with a
// running and a waiting job, shows what the daemon's API says: the jobs,
// the running job's GPU, share, limit and memory cap (tessera ps), the
// GPU's booking (tessera ps --gpus) and the waiting job's reason word for
// word (tessera queue).
func TestTopOnceShowsTheDaemonsState(t *testing.T) {
	host := startUp(t, "2xH200").host
	gate := filepath.Join(t.TempDir(), "gate")
	wait := fmt.Sprintf(`while [ ! -e %[1]s ]; do [ -d "$(dirname %[1]s)" ] || exit 99; sleep 0.02; done`, gate)
	var ids []string
	t.Cleanup(func() { // let the jobs end before their folders go
		_ = os.WriteFile(gate, nil, 0o600)
		for _, id := range ids {
			tessera(append([]string{"logs", "-f", id}, host...)...)
		}
	})
	detach := func(flags ...string) string {
		t.Helper()
		args := append(append(append([]string{"run", "--detach"}, host...), flags...), "--", "sh", "-c", wait)
		code, out, errs := tessera(args...)
		if code != 0 {
			t.Fatalf("run %v: %d %s", flags, code, errs)
		}
		ids = append(ids, strings.TrimSpace(out))
		return ids[len(ids)-1]
	}
	running := detach("--gpu-fraction", "0.5", "--gpu-limit", "0.8", "--gpu-memory", "20Gi", "--gpu-memory-limit", "30Gi", "--queue", "research")
	waitForState(t, host, running, api.Running)
	waiting := detach("--gpus", "2")
	waitForState(t, host, waiting, api.Queued)

	code, screen, errs := tessera(append([]string{"top", "--once"}, host...)...)
	if code != 0 {
		t.Fatalf("top --once: exit %d, stderr %q", code, errs)
	}

	// What the daemon's API says, through the other commands.
	var job api.Job
	for _, j := range psJobs(t, host) {
		if j.ID == running {
			job = j
		}
	}
	if len(job.Shares) != 1 {
		t.Fatalf("%s holds %d shares, want 1", running, len(job.Shares))
	}
	share := job.Shares[0]
	var queue []api.QueueEntry
	structured(t, &queue, append([]string{"queue", "-o", "json"}, host...)...)
	var st api.Status
	structured(t, &st, append([]string{"ps", "--gpus", "-o", "json"}, host...)...)
	if len(queue) != 1 || queue[0].ID != waiting || queue[0].Reason == "" {
		t.Fatalf("tessera queue: %+v; want %s waiting with a reason", queue, waiting)
	}

	header := strings.SplitN(screen, "\n", 2)[0]
	if want := fmt.Sprintf("%d GPUs · 1 running · 1 waiting · %s (simulated)", len(st.GPUs), st.Source); !strings.Contains(header, want) {
		t.Errorf("header %q lacks %q", header, want)
	}
	wantShare := quantity.FormatShare(share.ComputeMilli) + "/" + quantity.FormatShare(share.ComputeLimitMilli)
	if wantShare != "0.5/0.8" || share.MemoryLimitMiB != 30<<10 {
		t.Fatalf("the daemon gave %s a share of %s and a %d MiB cap; the test asked for 0.5/0.8 and 30Gi", running, wantShare, share.MemoryLimitMiB)
	}
	for _, want := range []string{"running", "research", fmt.Sprint(share.Index), wantShare, "-/" + quantity.FormatMiB(share.MemoryLimitMiB), "running "} {
		if r := screenRow(screen, running); !strings.Contains(r, "  "+want) {
			t.Errorf("row of %s %q lacks %q:\n%s", running, r, want, screen)
		}
	}
	for _, want := range []string{"waiting", "default", queue[0].Request, "waiting ", queue[0].Reason} {
		if r := screenRow(screen, waiting); !strings.Contains(r, "  "+want) {
			t.Errorf("row of %s %q lacks %q:\n%s", waiting, r, want, screen)
		}
	}
	if strings.Index(screen, waiting+" ") > strings.Index(screen, running+" ") {
		t.Errorf("%s (newer) is listed after %s:\n%s", waiting, running, screen)
	}
	for _, g := range st.GPUs {
		r := screenRow(screen, fmt.Sprint(g.Index))
		booked := int64(float64(1000)*(1-g.FreeFraction) + 0.5)
		want := []string{g.Model, quantity.FormatShare(booked) + " of 1", quantity.FormatMiB(g.MemoryMiB-g.FreeMemoryMiB) + " of "}
		if g.Index == share.Index {
			want = append(want, "  0.8  ", running)
		}
		for _, w := range want {
			if !strings.Contains(r, w) {
				t.Errorf("GPU %d row %q lacks %q (tessera ps --gpus: %+v):\n%s", g.Index, r, w, g, screen)
			}
		}
	}
}

// structured runs a tessera command with -o json and decodes its output.
func structured(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errs := tessera(args...)
	if code != 0 {
		t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v printed %q: %v", args, out, err)
	}
}

// Bad flags are usage errors naming the flag, the value and what it
// takes, before any daemon is asked; without --once, stdout must be a
// terminal; without a daemon, top says so as tessera ps does.
func TestTopRejectsBadFlags(t *testing.T) {
	state := t.TempDir() // no daemon here
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"interval too short", []string{"--once", "--interval", "10ms"}, 2, "--interval: must be in [250ms, 1h], got 10ms"},
		{"interval too long", []string{"--once", "--interval", "2h"}, 2, "--interval: must be in [250ms, 1h], got 2h0m0s"},
		{"interval not a duration", []string{"--interval", "soon"}, 2, `--interval: must be a duration such as 90s, 5m or 1h30m in [250ms, 1h], got "soon"`},
		{"unknown sort", []string{"--once", "--sort", "cost"}, 2, `--sort: must be one of newest, state, queue, gpu, longest, got "cost"`},
		{"unknown filter", []string{"--once", "--filter", "done"}, 2, `--filter: must be one of all, live, running, waiting, finished, got "done"`},
		{"an argument", []string{"--once", "job-1"}, 2, `unexpected argument "job-1"`},
		{"not a terminal", nil, 2, "stdout is not a terminal: tessera top draws a refreshing screen there; give --once to print one frame"},
		{"no daemon", []string{"--once"}, 1, "cannot reach the tessera daemon at " + filepath.Join(state, "tessera.sock")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := tessera(append([]string{"top", "--state-dir", state}, tt.args...)...)
			if code != tt.code || !strings.Contains(errs, tt.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", code, out, errs, tt.code, tt.want)
			}
		})
	}
}
