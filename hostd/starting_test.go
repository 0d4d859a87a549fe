package hostd

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/store"
)

// editRecord changes job id's record in a stopped daemon's state folder.
func editRecord(t *testing.T, state, id string, edit func(*api.Job)) {
	t.Helper()
	st, err := store.Open(state, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	j, err := st.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	edit(&j)
	if err := st.Put(j); err != nil {
		t.Fatal(err)
	}
}

// Defect (found by TestHostChaos): a daemon killed between starting a
// job's supervisor and recording it left the job queued, and the next
// daemon ran it a second time. The daemon now records the job as starting
// first, and its successor settles the run through the run's claim.
func TestDaemonDiedWhileStartingAJob(t *testing.T) {
	t.Run("the supervisor had claimed the run: adopted, runs once", func(t *testing.T) {
		state, gates := t.TempDir(), t.TempDir()
		d := startDaemon(t, state, "1xH100")
		j, err := d.Submit(gatedJob(gates, map[string]string{"compute": "1"}, 0))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the job to print", func() bool {
			out, _ := os.ReadFile(filepath.Join(d.JobDir(j.ID), "stdout.log"))
			return len(out) > 0
		})
		rec, _ := d.Job(j.ID)
		d.shutdown()
		// As if the daemon died before recording the supervisor.
		editRecord(t, state, j.ID, func(j *api.Job) { j.SupervisorPID, j.SupervisorStart = 0, 0 })

		d2 := startDaemon(t, state, "1xH100")
		got, _ := d2.Job(j.ID)
		if got.State != api.Running || got.SupervisorPID != rec.SupervisorPID || got.SupervisorStart != rec.SupervisorStart {
			t.Fatalf("after restart: %s supervisor %d/%d, want running under supervisor %d/%d",
				got.State, got.SupervisorPID, got.SupervisorStart, rec.SupervisorPID, rec.SupervisorStart)
		}
		openGate(t, gates, j.ID, 0)
		eventually(t, "the job to end", func() bool { return states(t, d2)[j.ID].Final() })
		assertRanOnce(t, d2, j.ID)
	})

	t.Run("no supervisor had claimed the run: queued again, runs once", func(t *testing.T) {
		state, gates := t.TempDir(), t.TempDir()
		d := startDaemon(t, state, "1xH100")
		full := map[string]string{"compute": "1"}
		blocker, err := d.Submit(gatedJob(gates, full, 0))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the first job to run", func() bool { return states(t, d)[blocker.ID] == api.Running })
		j, err := d.Submit(gatedJob(gates, full, 0))
		if err != nil {
			t.Fatal(err)
		}
		d.shutdown()
		// As if the daemon died after recording the job as starting, before
		// its supervisor claimed the run.
		editRecord(t, state, j.ID, func(j *api.Job) { j.State, j.Runs, j.Node, j.GPUs = api.Running, 1, 0, []int{0} })

		d2 := startDaemon(t, state, "1xH100")
		if st := states(t, d2)[j.ID]; st != api.Queued {
			t.Fatalf("after restart the unclaimed start is %s, want queued again", st)
		}
		openGate(t, gates, blocker.ID, 0)
		eventually(t, "the queued job to run", func() bool { return states(t, d2)[j.ID] == api.Running })
		openGate(t, gates, j.ID, 0)
		eventually(t, "the job to end", func() bool { return states(t, d2)[j.ID].Final() })
		assertRanOnce(t, d2, j.ID)
		got, _ := d2.Job(j.ID)
		if got.Runs != 2 {
			t.Errorf("runs = %d, want 2 (the cancelled start and the real one)", got.Runs)
		}
	})
}

// assertRanOnce checks a gated job succeeded and printed its devices once.
func assertRanOnce(t *testing.T, d *testDaemon, id string) {
	t.Helper()
	got, _ := d.Job(id)
	if got.State != api.Succeeded {
		t.Errorf("%s = %s (%s), want succeeded", id, got.State, got.Reason)
	}
	out, err := os.ReadFile(filepath.Join(d.JobDir(id), "stdout.log"))
	if err != nil || len(out) == 0 || len(out) != len(firstLine(out)) {
		t.Errorf("%s's output %q (%v): want one line, printed by one run", id, out, err)
	}
}

func firstLine(b []byte) []byte {
	for i, c := range b {
		if c == '\n' {
			return b[:i+1]
		}
	}
	return b
}
