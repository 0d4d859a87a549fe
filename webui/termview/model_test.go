package termview

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/tessera-gpu/tessera/webui"
)

// fakeDaemon answers fetches with the snapshots it is given, in turn, and
// counts them.
type fakeDaemon struct {
	answers []webui.Snapshot
	err     error
	calls   int
}

func (f *fakeDaemon) fetch(context.Context) (webui.Snapshot, error) {
	f.calls++
	if f.err != nil {
		return webui.Snapshot{}, f.err
	}
	return f.answers[min(f.calls, len(f.answers))-1], nil
}

// run executes cmd as the program would and returns the messages it
// produces (a batch's, each), leaving out the timer's: a test sends
// ticks itself (the tests' interval is a millisecond, so the timer's
// command returns at once).
func run(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	msg := cmd()
	if batch, ok := msg.(tea.BatchMsg); ok {
		var out []tea.Msg
		for _, c := range batch {
			out = append(out, run(c)...)
		}
		return out
	}
	if _, ok := msg.(tickMsg); ok {
		return nil
	}
	return []tea.Msg{msg}
}

func update(t *testing.T, m tea.Model, msg tea.Msg) (Model, tea.Cmd) {
	t.Helper()
	next, cmd := m.Update(msg)
	nm, ok := next.(Model)
	if !ok {
		t.Fatalf("Update returned a %T", next)
	}
	return nm, cmd
}

// deliver runs cmd and feeds what it produces back into m.
func deliver(t *testing.T, m Model, cmd tea.Cmd) Model {
	t.Helper()
	for _, msg := range run(cmd) {
		m, _ = update(t, m, msg)
	}
	return m
}

func key(s string) tea.KeyMsg {
	if s == "ctrl+c" {
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func TestModelKeysQuit(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c", "sq"} {
		s := host()
		m := NewModel(context.Background(), (&fakeDaemon{answers: []webui.Snapshot{s}}).fetch, &s, Options{Interval: time.Millisecond, Now: func() time.Time { return now }})
		_, cmd := update(t, m, key(k))
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s: %T, want tea.QuitMsg", k, cmd())
		}
	}
}

// A tick fetches a new snapshot and the view shows it; a tick while a
// fetch is still out starts no second one.
func TestModelTickRefreshes(t *testing.T) {
	first, second := host(), host()
	second.Workloads = append(second.Workloads, webui.Workload{ID: "job-9", State: "queued", Queue: "default", Request: "1 GPU", Submitted: now, Reason: "behind job-4"})
	second.Pending = append(second.Pending, webui.Pending{Position: 2, ID: "job-9", Queue: "default", Request: "1 GPU", Reason: "behind job-4", Submitted: now})
	second.Summarize()
	d := &fakeDaemon{answers: []webui.Snapshot{second}}
	m := NewModel(context.Background(), d.fetch, &first, Options{Interval: time.Millisecond, Now: func() time.Time { return now }})
	m, _ = update(t, m, tea.WindowSizeMsg{Width: 120, Height: 30})
	if strings.Contains(m.View(), "job-9") {
		t.Fatal("job-9 shown before any refresh")
	}
	if run(m.Init()) != nil || d.calls != 0 {
		t.Fatalf("Init with a first snapshot fetched %d times, want only the timer", d.calls)
	}

	m, cmd := update(t, m, tickMsg(now))
	m2, cmd2 := update(t, m, tickMsg(now)) // the first fetch has not answered
	if got := len(run(cmd2)); got != 0 || d.calls != 0 {
		t.Errorf("a second tick while fetching: %d messages, %d fetches; want none", got, d.calls)
	}
	m = deliver(t, m2, cmd)
	if d.calls != 1 {
		t.Errorf("%d fetches after one tick, want 1", d.calls)
	}
	view := m.View()
	if !strings.Contains(view, "job-9") || !strings.Contains(view, "2 waiting") {
		t.Errorf("after the tick the view lacks job-9 and 2 waiting:\n%s", view)
	}

	// The next tick fetches again: the earlier one has answered.
	m, cmd = update(t, m, tickMsg(now))
	_ = deliver(t, m, cmd)
	if d.calls != 2 {
		t.Errorf("%d fetches after two answered ticks, want 2", d.calls)
	}
}

// A failed refresh keeps the last snapshot and says why in the footer.
func TestModelRefreshFailureKeepsTheLastState(t *testing.T) {
	s := host()
	d := &fakeDaemon{err: errors.New("cannot reach the tessera daemon at /x.sock")}
	m := NewModel(context.Background(), d.fetch, &s, Options{Interval: time.Millisecond, Now: func() time.Time { return now }})
	m, cmd := update(t, m, tickMsg(now))
	m = deliver(t, m, cmd)
	view := m.View()
	lines := strings.Split(view, "\n")
	if !strings.Contains(view, "job-3") || lines[len(lines)-1] != "showing the state read at 04:12:05; could not refresh: cannot reach the tessera daemon at /x.sock" {
		t.Errorf("view after a failed refresh:\n%s", view)
	}

	// The daemon is back: the next refresh shows its state and the keys.
	d.err, d.answers = nil, []webui.Snapshot{host()}
	m, cmd = update(t, m, tickMsg(now))
	m = deliver(t, m, cmd)
	lines = strings.Split(m.View(), "\n")
	if !strings.HasPrefix(lines[len(lines)-1], "q quit") {
		t.Errorf("view after the daemon came back:\n%s", m.View())
	}
}

// A resize draws the next view at the new size; s and f change the job
// table's order and filter.
func TestModelResizeSortFilter(t *testing.T) {
	s := host()
	m := NewModel(context.Background(), (&fakeDaemon{answers: []webui.Snapshot{s}}).fetch, &s, Options{Interval: 2 * time.Second, Where: "/run/tessera.sock", Now: func() time.Time { return now }})
	for _, size := range []tea.WindowSizeMsg{{Width: 140, Height: 40}, {Width: 50, Height: 12}, {Width: 90, Height: 20}} {
		m, _ = update(t, m, size)
		lines := strings.Split(m.View(), "\n")
		if len(lines) > size.Height {
			t.Errorf("%dx%d: %d lines", size.Width, size.Height, len(lines))
		}
		widest := 0
		for _, l := range lines {
			widest = max(widest, ansi.StringWidth(l))
		}
		if widest > size.Width || (size.Width == 140 && widest < 100) {
			t.Errorf("%dx%d: widest line %d cells", size.Width, size.Height, widest)
		}
		if !strings.HasPrefix(lines[len(lines)-1], "q quit · s sort: newest · f filter: all") {
			t.Errorf("%dx%d: last line %q, want the keys", size.Width, size.Height, lines[len(lines)-1])
		}
	}

	m, _ = update(t, m, tea.WindowSizeMsg{Width: 140, Height: 40})
	m, _ = update(t, m, key("s"))
	m, _ = update(t, m, key("s"))
	if got := jobIDs(m.View()); !strings.Contains(m.View(), "s sort: queue") || strings.Join(got, " ") != "job-4 job-1 job-3" {
		t.Errorf("after s s: order %v:\n%s", got, m.View())
	}
	// Keys typed quickly arrive as one message: each counts.
	m, _ = update(t, m, key("sssss"))
	if !strings.Contains(m.View(), "s sort: queue") {
		t.Errorf("after five more s: %s", m.View())
	}
	m, _ = update(t, m, key("f"))
	m, _ = update(t, m, key("f"))
	if got := jobIDs(m.View()); !strings.Contains(m.View(), "f filter: running") || strings.Join(got, " ") != "job-3" {
		t.Errorf("after f f: jobs %v:\n%s", got, m.View())
	}
}

// Without a first snapshot, Init fetches at once.
func TestModelInitFetches(t *testing.T) {
	s := host()
	d := &fakeDaemon{answers: []webui.Snapshot{s}}
	m := NewModel(context.Background(), d.fetch, nil, Options{Interval: time.Millisecond, Where: "/run/tessera.sock", Now: func() time.Time { return now }})
	if v := m.View(); v != "reading the daemon at /run/tessera.sock …" {
		t.Errorf("view before the first answer: %q", v)
	}
	initCmd := m.Init()
	if _, cmd := update(t, m, tickMsg(now)); len(run(cmd)) != 0 {
		t.Error("a tick before the first answer fetched again")
	}
	m = deliver(t, m, initCmd)
	if d.calls != 1 || !strings.Contains(m.View(), "job-3") {
		t.Errorf("%d fetches; view:\n%s", d.calls, m.View())
	}
	// r refreshes at once.
	m, cmd := update(t, m, key("r"))
	_ = deliver(t, m, cmd)
	if d.calls != 2 {
		t.Errorf("%d fetches after r, want 2", d.calls)
	}
}
