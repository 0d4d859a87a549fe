package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tessera-gpu/tessera/hostd/client"
	"github.com/tessera-gpu/tessera/webui"
	"github.com/tessera-gpu/tessera/webui/termview"
)

// The range of tessera top --interval, and as help and errors say it.
const (
	minTopInterval   = 250 * time.Millisecond
	maxTopInterval   = time.Hour
	topIntervalRange = "in [250ms, 1h]"
)

type topOptions struct {
	host     hostFlags
	once     bool
	interval time.Duration
	sort     string
	filter   string
}

func newTopCommand(a *app) *cobra.Command {
	var o topOptions
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Watch the host daemon in the terminal: its GPUs, the shares on them and its jobs, refreshed",
		Long: `Show the host daemon's overview in the terminal, as its web dashboard shows it
(the same JSON, GET /ui/api/snapshot, so the two cannot disagree): the GPUs,
running and waiting jobs, the totals, one row per GPU (guaranteed share booked,
burst limit, measured grant where metered, memory booked) and the jobs, running
and waiting ones first, newest first, with their GPU, share and limit, memory
used and cap, how long they have run or waited, and why each waits.

It refreshes every --interval until q or ctrl-c. Keys: s cycles the job order
(newest, state, queue, gpu, longest), f the state filter (all, live, running,
waiting, finished), r refreshes now. If a refresh fails, the last state stays
on screen and the bottom line says why.

With --once it prints one frame and exits: fitted to the terminal when stdout
is one, else every line whole and every job listed, for scripts and pipes.
Without --once, stdout must be a terminal.`,
		Example: `  tessera top
  tessera top --interval 5s --filter live
  tessera top --once --sort longest | head -40
  tessera top --addr http://127.0.0.1:9400`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.top(cmd.Context(), o) },
	}
	o.host.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&o.once, "once", false, "print one frame to stdout and exit (no terminal needed)")
	f.DurationVar(&o.interval, "interval", 2*time.Second, "time between refreshes, "+topIntervalRange)
	setRange(cmd, "interval", topIntervalRange)
	f.StringVar(&o.sort, "sort", termview.SortNewest.String(), "job order: newest, state, queue, gpu or longest (the s key cycles them)")
	f.StringVar(&o.filter, "filter", termview.FilterAll.String(), "jobs listed: all, live (running or waiting), running, waiting or finished (the f key cycles them)")
	return cmd
}

func (a *app) top(ctx context.Context, o topOptions) error {
	if o.interval < minTopInterval || o.interval > maxTopInterval {
		return usageError("--interval: must be %s, got %s", topIntervalRange, o.interval)
	}
	sort, err := termview.ParseSort(o.sort)
	if err != nil {
		return usageError("--sort: %v", err)
	}
	filter, err := termview.ParseFilter(o.filter)
	if err != nil {
		return usageError("--filter: %v", err)
	}
	tty, width, height := terminal(a.stdout)
	if !o.once && !tty {
		return usageError("stdout is not a terminal: tessera top draws a refreshing screen there; give --once to print one frame (for pipes and scripts)")
	}
	c, err := a.hostClient(&o.host)
	if err != nil {
		return err
	}
	// The first read fails as tessera ps would (no daemon: the same
	// message), before the screen is taken over.
	first, err := c.Snapshot(ctx)
	if err != nil {
		return err
	}
	if o.once {
		if tty {
			height-- // keep the shell's prompt on screen
		}
		view := termview.View{Width: width, Height: height, Now: time.Now(), Sort: sort, Filter: filter}
		if _, err := fmt.Fprintln(a.stdout, termview.Render(first, view)); err != nil {
			return fmt.Errorf("write the frame: %w", err)
		}
		return nil
	}
	a.log.Debug("terminal view", "daemon", c.Where(), "interval", o.interval)
	return a.topScreen(ctx, c, first, termview.Options{Interval: o.interval, Where: c.Where(), Sort: sort, Filter: filter})
}

// topScreen runs the refreshing full-screen view until q, ctrl-c or ctx
// ends.
func (a *app) topScreen(ctx context.Context, c *client.Client, first webui.Snapshot, o termview.Options) error {
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithOutput(a.stdout), tea.WithAltScreen()}
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		opts = append(opts, tea.WithInputTTY()) // keys from the terminal, not the pipe
	}
	_, err := tea.NewProgram(termview.NewModel(ctx, c.Snapshot, &first, o), opts...).Run()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("terminal view: %w", err)
	}
	return nil
}

// terminal reports whether w is a terminal, and its size.
func terminal(w io.Writer) (tty bool, width, height int) {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, 0, 0
	}
	width, height, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return true, 0, 0
	}
	return true, width, height
}
