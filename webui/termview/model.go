package termview

import (
	"context"
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/tessera-gpu/tessera/webui"
)

// Fetch reads the daemon's snapshot (the client's GET /ui/api/snapshot).
type Fetch func(ctx context.Context) (webui.Snapshot, error)

// Options configure a Model.
type Options struct {
	// Interval is the time between two refreshes (at least one
	// millisecond; the command line validates its own range).
	Interval time.Duration
	// Where names the daemon in the footer (its socket or address).
	Where string
	// Sort and Filter are the job table's first order and filter.
	Sort
	Filter
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Model is the refreshing full-screen view, a bubbletea model: it fetches
// a snapshot every Interval (never two at once) and draws it with Render
// at the terminal's size. Keys: q or ctrl+c quits, s cycles the job
// table's order, f its filter, r refreshes now. A failed refresh keeps the
// last snapshot on screen and says why in the footer.
type Model struct {
	ctx   context.Context
	fetch Fetch
	o     Options

	width, height int
	snap          webui.Snapshot
	have          bool
	read          time.Time // when snap was read
	err           error     // the last refresh's failure, nil once one succeeds
	fetching      bool
}

// snapshotMsg carries one fetch's answer.
type snapshotMsg struct {
	snap webui.Snapshot
	err  error
	at   time.Time
}

// tickMsg is the refresh timer.
type tickMsg time.Time

// NewModel returns the view of the snapshots fetch reads; first, when
// non-nil, is shown until the first refresh. ctx bounds every fetch.
func NewModel(ctx context.Context, fetch Fetch, first *webui.Snapshot, o Options) Model {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Interval = max(o.Interval, time.Millisecond)
	m := Model{ctx: ctx, fetch: fetch, o: o}
	if first != nil {
		m.snap, m.have, m.read = *first, true, o.Now()
	}
	m.fetching = !m.have // Init fetches
	return m
}

// Init starts the refresh timer, and a fetch when there is nothing to show.
func (m Model) Init() tea.Cmd {
	if m.have {
		return m.tick()
	}
	return tea.Batch(m.fetchCmd(), m.tick())
}

func (m Model) tick() tea.Cmd {
	return tea.Tick(m.o.Interval, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// fetchCmd reads one snapshot, giving up after the longer of the interval
// and 5 seconds so that a daemon that does not answer shows as such.
func (m Model) fetchCmd() tea.Cmd {
	ctx, fetch, now, wait := m.ctx, m.fetch, m.o.Now, max(m.o.Interval, 5*time.Second)
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		s, err := fetch(ctx)
		return snapshotMsg{snap: s, err: err, at: now()}
	}
}

// Update handles keys, the timer, fetched snapshots and resizes.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch msg.Type {
		case tea.KeyCtrlC, tea.KeyEsc:
			return m, tea.Quit
		case tea.KeyRunes:
			// Keys typed quickly come as one message of several runes.
			var cmd tea.Cmd
			for _, r := range msg.Runes {
				switch r {
				case 'q':
					return m, tea.Quit
				case 's':
					m.o.Sort = m.o.Sort.Next()
				case 'f':
					m.o.Filter = m.o.Filter.Next()
				case 'r':
					if !m.fetching {
						m.fetching = true
						cmd = m.fetchCmd()
					}
				}
			}
			return m, cmd
		}
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		cmds := []tea.Cmd{m.tick()}
		if !m.fetching {
			m.fetching = true
			cmds = append(cmds, m.fetchCmd())
		}
		return m, tea.Batch(cmds...)
	case snapshotMsg:
		m.fetching = false
		m.err = msg.err
		if msg.err == nil {
			m.snap, m.have, m.read = msg.snap, true, msg.at
		}
	}
	return m, nil
}

// View draws the last snapshot at the terminal's size.
func (m Model) View() string {
	footer := fmt.Sprintf("q quit · s sort: %s · f filter: %s · r refresh · every %s", m.o.Sort, m.o.Filter, m.o.Interval)
	if m.o.Where != "" {
		footer += " · " + m.o.Where
	}
	if m.err != nil {
		footer = fmt.Sprintf("could not refresh: %v", m.err)
		if m.have {
			footer = fmt.Sprintf("showing the state read at %s; could not refresh: %v", m.read.Format("15:04:05"), m.err)
		}
	}
	if !m.have {
		if m.err == nil {
			footer = "reading the daemon at " + m.o.Where + " …"
		}
		line := clean(footer)
		if m.width > 0 {
			line = ansi.Truncate(line, m.width, "…")
		}
		return line
	}
	return Render(m.snap, View{Width: m.width, Height: m.height, Now: m.o.Now(), Sort: m.o.Sort, Filter: m.o.Filter, Footer: footer})
}
