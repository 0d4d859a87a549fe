package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// hostileStrings are strings a job or a daemon (or a program posing as
// one at --addr) may hand the CLI to print.
var hostileStrings = []string{
	"sleep 1\n1234 fake-row running default",
	"\x1b]0;pwn\x07",
	"\x1b[2J\x1b[31mred",
	"a\rb\tc\x00\x08\x7f",
	"\u0085\u009b2J\u2028\u202e",
	"\xff\xfe\xc3",
	"日本語 ✓",
}

// terminalSafe fails t unless out is valid UTF-8 of exactly lines lines,
// with no control character but the line ends: no ESC, BEL, CR, tab,
// DEL or C1 character, whatever the strings printed held.
func terminalSafe(t *testing.T, what, out string, lines int) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("%s: not valid UTF-8:\n%q", what, out)
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r < 0xa0) {
			t.Fatalf("%s: holds control character %U:\n%q", what, r, out)
		}
	}
	if n := strings.Count(out, "\n"); n != lines || (out != "" && !strings.HasSuffix(out, "\n")) {
		t.Fatalf("%s: %d lines, want %d:\n%s", what, n, lines, out)
	}
}

// checkTables prints the tables of tessera ps, ps --gpus, queue and queue
// --queues with s in every string field, and checks each line by line.
func checkTables(t *testing.T, a, b string) {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	code := 3
	jobs := []api.Job{
		{ID: a, State: api.State(b), Queue: b, Command: []string{a, b, strings.Repeat(b, 20)}, Submitted: now.Add(-time.Minute),
			Shares: []binding.Share{{Index: 0, MIGProfile: a}, {Index: 1, ComputeMilli: 500}}, Preempt: &api.Preemption{By: b, Kind: a}},
		{ID: b, State: api.Preempted, Queue: a, Command: []string{b}, Submitted: now, ExitCode: &code,
			LastPreemption: &api.Preemption{By: a, Kind: b}, Reason: a},
		{ID: a + b, State: api.Queued, Command: nil, Submitted: now, Preemptions: 2, LastPreemption: &api.Preemption{By: b, Kind: a}},
	}
	var out bytes.Buffer
	if err := writeJobs(&out, jobs, now); err != nil {
		t.Fatal(err)
	}
	terminalSafe(t, "ps", out.String(), 1+len(jobs))

	out.Reset()
	queue := []api.QueueEntry{{Position: 1, ID: a, Queue: b, Request: a, Reason: b}, {Position: 2, ID: b, Queue: a, Request: b, Reason: a}}
	if err := writeQueue(&out, queue); err != nil {
		t.Fatal(err)
	}
	terminalSafe(t, "queue", out.String(), 1+len(queue))

	out.Reset()
	queues := []api.QueueStatus{{Name: a, Parent: b}, {Name: b, Parent: a, Configured: true}}
	if err := writeQueues(&out, queues); err != nil {
		t.Fatal(err)
	}
	terminalSafe(t, "queue --queues", out.String(), 1+len(queues))

	out.Reset()
	st := api.Status{Source: a, Simulated: true, GPUs: []api.GPUStatus{
		{Index: 0, UUID: a, Model: b, Jobs: []string{a, b}},
		{Index: 1, UUID: b, Model: a, MIG: []api.MIGInstanceStatus{{Profile: a, UUID: b, Job: a, InUse: true}, {Profile: b}}},
	}}
	if err := writeHostGPUs(&out, st); err != nil {
		t.Fatal(err)
	}
	// A line per GPU and per MIG instance, the header, a blank line and
	// the inventory line.
	terminalSafe(t, "ps --gpus", out.String(), 1+2+2+2)
}

func TestTablesEscapeControlCharacters(t *testing.T) {
	for _, a := range hostileStrings {
		for _, b := range hostileStrings {
			checkTables(t, a, b)
		}
	}
	var out bytes.Buffer
	job := api.Job{ID: "job-1", State: api.Running, Queue: "default", Command: []string{"/bin/sh", "-c", "echo\n1234 fake-row", "\x1b]0;pwn\x07", "\x1b[2J"}}
	if err := writeJobs(&out, []api.Job{job}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The command is cut at 60 characters of its escaped form.
	if want := `/bin/sh -c echo\n1234 fake-row \x1b]0;pwn\a \x1b[2J`; !strings.Contains(out.String(), want) {
		t.Errorf("ps row lacks the escaped command %q:\n%s", want, out.String())
	}
}

// FuzzWriteTables puts any strings in every string field of the tables
// of tessera ps, ps --gpus, queue and queue --queues: each table keeps
// one line per row and holds no control character but its line ends.
func FuzzWriteTables(f *testing.F) {
	for i, s := range hostileStrings {
		f.Add(s, hostileStrings[(i+1)%len(hostileStrings)])
	}
	f.Add("", "")
	f.Fuzz(func(t *testing.T, a, b string) { checkTables(t, a, b) })
}
