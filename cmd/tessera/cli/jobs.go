package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/client"
	"github.com/tessera-gpu/tessera/internal/termsafe"
	"github.com/tessera-gpu/tessera/queueing"
)

// hostClient returns a client for the daemon h locates: over its socket,
// or over TCP with --addr / TESSERA_ADDR, sending the API token from
// TESSERA_TOKEN or STATE_DIR/api-token.
func (a *app) hostClient(h *hostFlags) (*client.Client, error) {
	stateDir, socket, err := h.resolve()
	if err != nil {
		return nil, err
	}
	if h.timeout < 0 {
		return nil, usageError("--timeout: must be 0 (wait as long as it takes) or more, got %s", h.timeout)
	}
	addr, err := h.address()
	if err != nil {
		return nil, err
	}
	var c *client.Client
	if addr == "" {
		c = client.New(socket)
	} else {
		token, from, err := apiToken(stateDir)
		if err != nil {
			return nil, err
		}
		if c, err = client.NewHTTP(addr, token, from); err != nil {
			return nil, fmt.Errorf("--addr: %w", err)
		}
	}
	c.SetTimeout(h.timeout)
	return c, nil
}

// apiToken finds the API token for a daemon over TCP: TESSERA_TOKEN, else
// the state folder's token file; from says where it came from (or where
// it was looked for), for messages. No token is no error: reads need none.
func apiToken(stateDir string) (token, from string, err error) {
	if t := strings.TrimSpace(os.Getenv(api.TokenEnv)); t != "" {
		return t, api.TokenEnv, nil
	}
	path := filepath.Join(stateDir, api.TokenFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Sprintf("%s is empty and there is no %s", api.TokenEnv, path), nil
	case errors.Is(err, fs.ErrPermission):
		return "", "", fmt.Errorf("API token %s: %w: it is readable by the daemon's user only; run as that user, or set %s", path, err, api.TokenEnv)
	case err != nil:
		return "", "", fmt.Errorf("API token %s: %w", path, err)
	}
	return strings.TrimSpace(string(data)), path, nil
}

func newPsCommand(a *app) *cobra.Command {
	var (
		host    hostFlags
		all     bool
		gpus    bool
		showEnv bool
		output  string
	)
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List the host daemon's jobs, or with --gpus its GPUs' live free fractions",
		Example: `  tessera ps
  tessera ps -a -o json
  tessera ps --gpus`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return asUsage(err)
			}
			c, err := a.hostClient(&host)
			if err != nil {
				return err
			}
			if gpus {
				st, err := c.Status(cmd.Context())
				if err != nil {
					return err
				}
				if output != formatTable {
					return writeStructured(a.stdout, output, st)
				}
				return writeHostGPUs(a.stdout, st)
			}
			if showEnv && output == formatTable {
				return usageError("--show-env: needs -o json or -o yaml (the table has no environment column)")
			}
			jobs, err := c.JobsWithEnv(cmd.Context(), showEnv)
			if err != nil {
				return err
			}
			shown := []api.Job{}
			for _, j := range jobs {
				if all || !j.State.Final() {
					shown = append(shown, j)
				}
			}
			if output != formatTable {
				return writeStructured(a.stdout, output, shown)
			}
			return writeJobs(a.stdout, shown, time.Now())
		},
	}
	host.register(cmd)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include finished jobs")
	cmd.Flags().BoolVar(&gpus, "gpus", false, "show each GPU's free fraction, free memory and jobs instead")
	cmd.Flags().BoolVar(&showEnv, "show-env", false, "with -o json|yaml, include the environment of your own jobs (the daemon shows it to no one else)")
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	return cmd
}

// writeJobs prints the jobs, one line each. Every string from the daemon
// is escaped (termsafe), so none can add a line or reach the terminal as
// a control sequence; -o json and -o yaml keep them as they are.
func writeJobs(w io.Writer, jobs []api.Job, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tQUEUE\tPRIORITY\tGPUS\tEXIT\tSUBMITTED\tNOTE\tCOMMAND")
	for _, j := range jobs {
		exit := "-"
		if j.ExitCode != nil {
			exit = fmt.Sprint(*j.ExitCode)
		}
		var gpus []string
		for _, s := range j.Shares {
			if s.MIGProfile != "" {
				gpus = append(gpus, fmt.Sprintf("%d:%s", s.Index, termsafe.String(s.MIGProfile)))
				continue
			}
			gpus = append(gpus, fmt.Sprintf("%d:%s", s.Index, trimShare(s.ComputeMilli)))
		}
		g := strings.Join(gpus, ",")
		if g == "" {
			g = "-"
		}
		cmd := termsafe.String(strings.Join(j.Command, " "))
		if r := []rune(cmd); len(r) > 60 {
			cmd = string(r[:57]) + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s ago\t%s\t%s\n", termsafe.String(j.ID), termsafe.String(string(j.State)), termsafe.String(j.Queue),
			j.Priority, g, exit, now.Sub(j.Submitted).Round(time.Second), jobNote(j), cmd)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// jobNote is the short why of a job's state for tessera ps: who preempted
// it (or is preempting it), else "-" (ps -o json has the full reason);
// terminal-safe.
func jobNote(j api.Job) string {
	return termsafe.String(rawJobNote(j))
}

func rawJobNote(j api.Job) string {
	switch {
	case j.Preempt != nil && j.State == api.Running:
		return "being preempted by " + j.Preempt.By + " (" + j.Preempt.Kind + ")"
	case j.State == api.Preempted && j.LastPreemption != nil:
		return "by " + j.LastPreemption.By + " (" + j.LastPreemption.Kind + ")"
	case j.LastPreemption != nil:
		return fmt.Sprintf("preempted %dx, last by %s (%s); restartable", j.Preemptions, j.LastPreemption.By, j.LastPreemption.Kind)
	}
	return "-"
}

func trimShare(milli int64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", float64(milli)/1000), "0"), ".")
}

func writeHostGPUs(w io.Writer, st api.Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tMODEL\tFREE\tFREE MEMORY\tUSED\tJOBS\tUUID")
	for _, g := range st.GPUs {
		jobs := termsafe.String(strings.Join(g.Jobs, ","))
		if jobs == "" {
			jobs = "-"
		}
		used := "-"
		if g.Use != nil {
			used = useWords(*g.Use)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s / %s\t%s\t%s\t%s\n", g.Index, termsafe.String(g.Model), trimShare(int64(g.FreeFraction*1000+0.5)), humanMiB(g.FreeMemoryMiB), humanMiB(g.MemoryMiB), used, jobs, termsafe.String(g.UUID))
		for _, sh := range g.Shares { // each job's booking beside its use
			idle := ""
			if sh.Idle != nil {
				idle = ", idle since " + sh.Idle.Since.Local().Format("15:04")
			}
			fmt.Fprintf(tw, "\t  %s\tbooked %s/%s\t%s / cap %s\t%s%s\t\t\n", termsafe.String(sh.Workload),
				trimShare(sh.Booked.GuaranteedMilli), trimShare(sh.Booked.LimitMilli), memUsed(sh.Use), humanMiB(sh.Booked.MemoryLimitMiB), useWords(sh.Use), idle)
		}
		for _, in := range g.MIG { // a GPU in MIG mode: one line per instance
			state, job := "free", "-"
			if in.InUse {
				state = "in use"
			}
			if in.Job != "" {
				job = in.Job
			}
			fmt.Fprintf(tw, "\t  MIG %s@%d\t%s\t%s\t%s\t%s\n", termsafe.String(in.Profile), in.Start, state, humanMiB(in.MemoryMiB), termsafe.String(job), termsafe.String(in.UUID))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	src := st.Source
	if st.Simulated {
		src += " (simulated)"
	}
	fmt.Fprintf(w, "\nInventory: %s; %d running, %d queued\n", termsafe.String(src), st.Running, st.Queued)
	if u := st.Use; u != nil {
		fmt.Fprintf(w, "Use: each job's busy fraction of the GPU over %gs windows; idle holder: below %s for %v (tessera up --idle-below, --idle-after)\n",
			u.WindowSeconds, trimShare(u.IdleBelowMilli), time.Duration(u.IdleAfterSeconds*float64(time.Second)))
	}
	return nil
}

// useWords is a use figure with its source ("0.3 simulated", "0.42
// measured"), or why nothing measures it; terminal-safe.
func useWords(u gpuuse.Use) string {
	if u.BusyMilli != nil && u.Known() {
		return trimShare(*u.BusyMilli) + " " + string(u.Source)
	}
	return termsafe.String(cmp.Or(u.Reason, "not metered"))
}

// memUsed is the memory a share holds, "-" when unknown.
func memUsed(u gpuuse.Use) string {
	if u.MemoryUsedMiB == nil {
		return "-"
	}
	return humanMiB(*u.MemoryUsedMiB)
}

func newLogsCommand(a *app) *cobra.Command {
	var (
		host   hostFlags
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print a job's output (its stdout here on stdout, its stderr on stderr)",
		Long: `Print a job's output: its stdout here on stdout, then its stderr on stderr.
A job that has not started yet has no output: tessera logs says so on stderr
(and why the job waits) and exits 1; with -f it waits for the job to start
and follows its output until it ends.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("JOB: give one job ID, got %d, e.g. tessera logs job-3 (tessera ps -a lists them)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.hostClient(&host)
			if err != nil {
				return err
			}
			j, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return jobError(err, args[0])
			}
			if err := a.noOutputYet(cmd.Context(), c, j, follow); err != nil {
				return err
			}
			if _, err := c.Logs(cmd.Context(), args[0], "stdout", follow, 0, a.stdout); err != nil {
				return err
			}
			_, err = c.Logs(cmd.Context(), args[0], "stderr", follow, 0, a.stderr)
			return err
		},
	}
	host.register(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing stdout until the job ends (then its stderr)")
	return cmd
}

func newStopCommand(a *app) *cobra.Command {
	var host hostFlags
	cmd := &cobra.Command{
		Use:   "stop JOB...",
		Short: "Stop jobs: a queued job leaves the queue, a running one gets SIGTERM (then SIGKILL)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("JOB: give at least one job ID, e.g. tessera stop job-3 (tessera ps lists them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.hostClient(&host)
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range args {
				j, err := c.Stop(cmd.Context(), id)
				if err != nil {
					errs = append(errs, jobError(err, id))
					continue
				}
				if j.State == api.Running {
					fmt.Fprintf(a.stdout, "%s: stopping\n", termsafe.String(id))
				} else {
					fmt.Fprintf(a.stdout, "%s: %s\n", termsafe.String(id), termsafe.String(string(j.State)))
				}
			}
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
			return nil
		},
	}
	host.register(cmd)
	return cmd
}

// noOutputYet handles a job that has never started, so has no output:
// without follow it says so on stderr, with why the job waits, and
// fails (exit 1: there is nothing to print); with follow it says so and
// lets the caller follow the output once the job starts.
func (a *app) noOutputYet(ctx context.Context, c *client.Client, j api.Job, follow bool) error {
	switch {
	case j.Started != nil:
		return nil
	case j.Preemptions > 0: // re-queued: its earlier runs' output is there
		if j.State == api.Queued {
			fmt.Fprintf(a.stderr, "tessera: %s is queued again (preempted %dx); the output of its earlier runs follows\n", termsafe.String(j.ID), j.Preemptions)
		}
		return nil
	case j.State.Final():
		return &exitError{code: 1, msg: fmt.Sprintf("%s never started (%s: %s), so it has no output", termsafe.String(j.ID), termsafe.String(string(j.State)), termsafe.String(cmp.Or(j.Reason, "no reason recorded")))}
	}
	why := ""
	if q, err := c.Queue(ctx); err == nil {
		for _, e := range q {
			if e.ID == j.ID && e.Reason != "" {
				why = fmt.Sprintf(" (position %d: %s)", e.Position, termsafe.String(e.Reason))
			}
		}
	}
	id, state := termsafe.String(j.ID), termsafe.String(string(j.State))
	if follow {
		fmt.Fprintf(a.stderr, "tessera: %s is %s%s; its output follows once it starts\n", id, state, why)
		return nil
	}
	return &exitError{code: 1, msg: fmt.Sprintf("%s is %s%s and has no output yet; tessera logs -f %s waits for it to start and follows its output", id, state, why, id)}
}

func jobError(err error, id string) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return fmt.Errorf("JOB: no job %q (see tessera ps -a)", id)
	}
	return err
}

func newQueueCommand(a *app) *cobra.Command {
	var (
		host   hostFlags
		output string
		queues bool
	)
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List waiting jobs in the order they will start, and why each waits (--queues: the queues)",
		Long: `List waiting jobs in start order. Queues (--queue) take turns by fair
share: the queue using the least of the host's GPUs goes next, as in the
Kubernetes scheduler. Within a queue, jobs start by priority (higher first; a
job's priority rises by one for every minute it waits, so nothing starves),
then in submission order, strictly: a job that does not fit holds back the
jobs behind it, so large jobs are never overtaken forever.

With --queues it lists the queues instead: configured ones (tessera up
--config), default, and any other in use, with their guarantee, limit, what
their running jobs use and their fair-share position (SHARE below 1: within
the guarantee).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return asUsage(err)
			}
			c, err := a.hostClient(&host)
			if err != nil {
				return err
			}
			if queues {
				qs, err := c.Queues(cmd.Context())
				if err != nil {
					return err
				}
				if output != formatTable {
					return writeStructured(a.stdout, output, qs)
				}
				return writeQueues(a.stdout, qs)
			}
			q, err := c.Queue(cmd.Context())
			if err != nil {
				return err
			}
			if output != formatTable {
				return writeStructured(a.stdout, output, q)
			}
			return writeQueue(a.stdout, q)
		},
	}
	host.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	cmd.Flags().BoolVar(&queues, "queues", false, "list the queues (guarantee, limit, usage, fair share) instead of the waiting jobs")
	return cmd
}

// writeQueue prints the waiting jobs in start order, one line each.
func writeQueue(w io.Writer, q []api.QueueEntry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tJOB\tQUEUE\tPRIORITY\tREQUEST\tWHY")
	for _, e := range q {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", e.Position, termsafe.String(e.ID), termsafe.String(e.Queue), e.Priority, termsafe.String(e.Request), termsafe.String(e.Reason))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func writeQueues(w io.Writer, qs []api.QueueStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARENT\tPRIORITY\tWEIGHT\tGUARANTEED\tLIMIT\tUSED\tSHARE\tRUNNING\tWAITING\tIDLE-RECLAIM")
	for _, q := range qs {
		name := q.Name
		if !q.Configured {
			name += " (auto)"
		}
		parent := q.Parent
		if parent == "" {
			parent = "-"
		}
		idle := "off"
		if q.IdleReclaimAfterSeconds > 0 {
			idle = (time.Duration(q.IdleReclaimAfterSeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%.2f\t%d\t%d\t%s\n", termsafe.String(name), termsafe.String(parent), q.Priority, q.Weight,
			amounts(q.Guaranteed, "-"), amounts(q.Limit, "none"), amounts(q.Used, "0"), q.Share, q.Running, q.Waiting, idle)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// amounts renders GPU compute and memory ("1.5 GPU, 80Gi"), or none.
func amounts(r queueing.Resources, none string) string {
	var parts []string
	if r.GPUMilli > 0 {
		parts = append(parts, trimShare(r.GPUMilli)+" GPU")
	}
	if r.GPUMemoryMiB > 0 {
		parts = append(parts, humanMiB(r.GPUMemoryMiB))
	}
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, ", ")
}
