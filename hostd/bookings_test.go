package hostd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

func readJournal(t *testing.T, state string) []Booking {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, BookingsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []Booking
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var b Booking
		if err := json.Unmarshal([]byte(line), &b); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		out = append(out, b)
	}
	return out
}

// The journal shows each booking with the amounts the engine moved, and a
// restarted daemon's start followed by the re-booking of what it adopted.
func TestBookingJournal(t *testing.T) {
	state, gates := t.TempDir(), t.TempDir()
	d := startDaemon(t, state, "1xH100")
	j, err := d.Submit(gatedJob(gates, map[string]string{"compute": "0.25"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job to run", func() bool { return states(t, d)[j.ID] == api.Running })
	d.shutdown()
	d2 := startDaemon(t, state, "1xH100")
	openGate(t, gates, j.ID, 0)
	eventually(t, "the job to end", func() bool { return states(t, d2)[j.ID].Final() })
	d2.shutdown()

	uuid := d2.cfg.Nodes[0].GPUs[0].UUID
	var got []string
	for _, b := range readJournal(t, state) {
		s := b.Op + " " + b.Job
		for _, g := range b.GPUs {
			if g.UUID != uuid {
				t.Errorf("%s %s on GPU %s, want %s", b.Op, b.Job, g.UUID, uuid)
			}
			if g.ComputeMilli != 250 || g.MemoryMiB <= 0 {
				t.Errorf("%s %s moved %dm and %d MiB, want 250m and the share's memory", b.Op, b.Job, g.ComputeMilli, g.MemoryMiB)
			}
		}
		got = append(got, strings.TrimSpace(s))
	}
	want := []string{"start", "book " + j.ID, "start", "book " + j.ID, "release " + j.ID}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("journal = %q, want %q", got, want)
	}
}

// A full journal moves aside at a daemon's start only, so each file
// replays on its own.
func TestBookingJournalRotatesAtStart(t *testing.T) {
	state := t.TempDir()
	j, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	j.size = bookingsMaxBytes // as if full
	if err := j.write(Booking{Op: "book", Job: "job-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, BookingsFile+".1")); err == nil {
		t.Fatal("the journal rotated on a book line")
	}
	if err := j.write(Booking{Op: "start"}); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(state, BookingsFile+".1"))
	if err != nil || !strings.Contains(string(old), `"job-1"`) {
		t.Fatalf("rotated journal = %q, %v", old, err)
	}
	if got := readJournal(t, state); len(got) != 1 || got[0].Op != "start" {
		t.Errorf("new journal = %+v, want one start line", got)
	}
}
