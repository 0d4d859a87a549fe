package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/server"
	"github.com/tessera-gpu/tessera/hostd/store"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/internal/safefs"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/quantity"
)

// Environment variables that stand in for --state-dir, --socket and --addr.
const (
	envStateDir = "TESSERA_STATE_DIR"
	envSocket   = "TESSERA_SOCKET"
	envAddr     = "TESSERA_ADDR"
)

// interceptLibName is the file `make -C intercept` builds.
const interceptLibName = "libtessera-intercept.so"

// hostFlags locate one host daemon: its state folder and its socket, or
// for clients its TCP address (tessera up --http).
type hostFlags struct {
	stateDir, socket, addr string
	// timeout bounds each call to the daemon (--timeout).
	timeout time.Duration
}

// defaultCallTimeout is --timeout's default: a daemon that has not
// answered a call in this long is stopped, frozen or overloaded.
const defaultCallTimeout = 30 * time.Second

// register adds the flags of a client command: the daemon's state folder
// and socket, or its TCP address.
func (h *hostFlags) register(cmd *cobra.Command) {
	h.registerDaemon(cmd)
	cmd.Flags().StringVar(&h.addr, "addr", "", "talk to the daemon over TCP instead of its socket: its tessera up --http address, http://127.0.0.1:PORT (env "+envAddr+"); the daemon must first prove it holds the API token (env "+api.TokenEnv+" or STATE_DIR/"+api.TokenFile+"), which is never sent")
	cmd.Flags().DurationVar(&h.timeout, "timeout", defaultCallTimeout, "how long to wait for the daemon to answer a call (0: as long as it takes); a job's run time is not limited")
}

// registerDaemon adds --state-dir and --socket.
func (h *hostFlags) registerDaemon(cmd *cobra.Command) {
	cmd.Flags().StringVar(&h.stateDir, "state-dir", "", "daemon state folder (env "+envStateDir+"; default $XDG_STATE_HOME/tessera or ~/.local/state/tessera)")
	cmd.Flags().StringVar(&h.socket, "socket", "", "daemon API socket (env "+envSocket+"; default STATE_DIR/tessera.sock)")
}

// address returns the daemon's TCP address when the client should use it
// ("" for the socket): --addr, else TESSERA_ADDR unless --socket is given.
func (h *hostFlags) address() (string, error) {
	switch {
	case h.addr != "" && h.socket != "":
		return "", fmt.Errorf("--addr and --socket: give one, got --addr %q and --socket %q", h.addr, h.socket)
	case h.addr != "":
		return h.addr, nil
	case h.socket != "":
		return "", nil
	}
	return os.Getenv(envAddr), nil
}

// resolve applies flag, then environment, then default.
func (h *hostFlags) resolve() (stateDir, socket string, err error) {
	stateDir, socket = h.stateDir, h.socket
	if stateDir == "" {
		stateDir = os.Getenv(envStateDir)
	}
	if stateDir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", "", fmt.Errorf("--state-dir: not set and no home folder to default to: %w", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		stateDir = filepath.Join(base, "tessera")
	}
	if socket == "" {
		socket = os.Getenv(envSocket)
	}
	if socket == "" {
		socket = filepath.Join(stateDir, "tessera.sock")
	}
	if stateDir, err = filepath.Abs(stateDir); err != nil {
		return "", "", fmt.Errorf("--state-dir: %w", err)
	}
	if socket, err = filepath.Abs(socket); err != nil {
		return "", "", fmt.Errorf("--socket: %w", err)
	}
	return stateDir, socket, nil
}

type upOptions struct {
	host         hostFlags
	simulate     string
	socketMode   string
	httpAddr     string
	policy       string
	interceptLib string
	stopGrace    time.Duration
	config       string
	// minRuntime is --preemption-min-runtime; minRuntimeSet says it was
	// given (it then wins over the config file).
	minRuntime    time.Duration
	minRuntimeSet bool
	noPreempt     bool
	// sharing is --sharing (shared or mps, as on the node agent); mpsRoot and mpsControl are
	// --mps-root and --mps-control ("" for their defaults).
	sharing, mpsRoot, mpsControl string
	// contain is --contain: auto, cgroup or mark.
	contain string
	// jobUser is --job-user: whom a root daemon runs root's and token
	// holders' jobs as ("" for root).
	jobUser string
	// runtimeDir is --runtime-dir: where a root daemon makes the
	// accounting folders of jobs it runs as other users ("" for
	// /run/tessera/<digest of the state folder>).
	runtimeDir string
	// recover is --recover: rebuild a damaged job database first.
	recover bool
	// migManaged is --mig-managed: GPUs whose MIG layout the daemon manages.
	migManaged string
	// idleBelow and idleAfter are --idle-below and --idle-after: the
	// idle-holder rule (gpuuse.IdleRule).
	idleBelow string
	idleAfter time.Duration
	// lendIdle is --lend-idle: an idle holder's guarantee is lent
	// (arbiter.Config.KeepIdleGuarantee when off).
	lendIdle bool
}

func newUpCommand(a *app) *cobra.Command {
	var o upOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the single-host daemon: queue, place and run GPU jobs on this machine",
		Long: `Run Tessera's host daemon in the foreground. It discovers this host's GPUs
(NVML; without a driver it simulates 8xH200 and says so), keeps a persistent job
queue in the state folder, starts jobs submitted with "tessera run" when they
fit, and serves its API on a unix socket (owner-only unless --socket-mode),
Prometheus metrics at /metrics and the dashboard at / (on the socket, and on
--http when given, where submitting and stopping need the API token kept in
STATE_DIR/api-token: tessera ps/run/stop/... --addr http://ADDRESS send it).
Jobs keep running across daemon restarts.`,
		Example: `  tessera up
  tessera up --simulate 2xH200 --state-dir /tmp/t1
  tessera up --config /etc/tessera/host.yaml --preemption-min-runtime 5m
  tessera up --http 127.0.0.1:9400
  tessera up --sharing mps`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.minRuntimeSet = cmd.Flags().Changed("preemption-min-runtime")
			return a.runUp(cmd.Context(), o)
		},
	}
	o.host.registerDaemon(cmd)
	f := cmd.Flags()
	f.StringVar(&o.simulate, "simulate", "", `simulate GPUs instead of reading NVML: a spec such as 8xH200 or 4xA100-80GB+2xL4, or a nodes .yaml file`)
	f.StringVar(&o.socketMode, "socket-mode", "0600", "socket file mode, octal; anyone who can open the socket can run commands as this user (0660: its group; the state folder then becomes traversable, not listable, when the socket is in it)")
	f.StringVar(&o.httpAddr, "http", "", "also serve the API, metrics and dashboard over HTTP on this loopback address (127.0.0.1:PORT or [::1]:PORT); submitting and stopping there need the API token, kept in STATE_DIR/"+api.TokenFile)
	f.StringVar(&o.policy, "policy", "", fmt.Sprintf("placement policy: one of %s, or %s (the same as %s, the default)", strings.Join(placement.Names(), ", "), placement.DefaultAlias, placement.DefaultPolicy))
	f.StringVar(&o.interceptLib, "intercept-lib", "", "interception library to preload into jobs (default: "+interceptLibName+" from intercept/build or /usr/local/lib/tessera, when found)")
	f.DurationVar(&o.stopGrace, "stop-grace", 10*time.Second, "time a stopped job has between SIGTERM and SIGKILL")
	f.StringVar(&o.config, "config", "", "YAML file declaring queues (name, parent, priority, guaranteed, weight, limit, idleReclaimAfter: the fields of the cluster's Queue) and preemption settings; see docs/host.md")
	f.DurationVar(&o.minRuntime, "preemption-min-runtime", time.Minute, "jobs that have run less than this are never preempted (wins over the config file)")
	f.BoolVar(&o.noPreempt, "disable-preemption", false, "never stop running jobs to make room for waiting ones")
	f.StringVar(&o.contain, "contain", "auto", "how each job's processes are kept together so all of them end before its GPU share is freed: cgroup (a cgroup v2 per job; refuse to start without a writable hierarchy), mark (an environment mark found in /proc; a process that clears its environment escapes) or auto (cgroup where possible, else mark)")
	f.StringVar(&o.jobUser, "job-user", "", "user (name or uid) a daemon running as root runs the jobs of root and of API token holders as (default: root, and a job running as root can leave its cgroup); a job another user submits over the socket always runs as that user")
	f.StringVar(&o.runtimeDir, "runtime-dir", "", "where a daemon running as root makes the accounting folders of jobs it runs as other users (it makes the folder and its parent, root's, mode 0711, and removes the folder when it stops with none left in it; default "+hostd.DefaultRuntimeRoot+"/<digest of the state folder>)")
	f.BoolVar(&o.recover, "recover", false, "rebuild the job database from the job folders before starting (keeps the old file as jobs.db.damaged-TIME); for a database tessera up refuses as damaged")
	f.StringVar(&o.migManaged, "mig-managed", "", `GPUs whose MIG layout this daemon manages: "all" (every GPU in MIG mode) or GPU UUIDs, comma-separated; a --mig job placed on one gets its instance created when it starts and destroyed when it ends (simulated with --simulate). The GPUs must already be in MIG mode: Tessera never switches it (docs/mig.md)`)
	f.StringVar(&o.idleBelow, "idle-below", quantity.FormatShare(gpuuse.DefaultIdleBelowMilli), "a job whose measured (or, on simulated GPUs, simulated) use of a GPU stays below this share for --idle-after is shown as an idle holder")
	f.DurationVar(&o.idleAfter, "idle-after", gpuuse.DefaultIdleAfter, "how long a job's use must stay below --idle-below before it is shown as an idle holder")
	f.BoolVar(&o.lendIdle, "lend-idle", true, "lend an idle holder's compute guarantee to the other jobs on its GPU (up to their burst limits) until its use rises again; it keeps running, its memory and a floor of twice --idle-below (--sharing shared only)")
	f.StringVar(&o.sharing, "sharing", sharingShared, "how jobs share a GPU: shared (the node arbiter gates kernel launches with tokens) or mps (NVIDIA MPS caps each job; jobs take one GPU each)")
	f.StringVar(&o.mpsRoot, "mps-root", "", "with --sharing mps: folder of the MPS control daemons' pipe and log folders, keep it short (default STATE_DIR/mps)")
	f.StringVar(&o.mpsControl, "mps-control", "", "with --sharing mps: the MPS control program (default "+mps.DefaultBinary+" on PATH; required on simulated GPUs)")
	return cmd
}

// newSuperviseCommand is the hidden per-job supervisor the daemon starts.
func newSuperviseCommand(_ *app) *cobra.Command {
	return &cobra.Command{
		Use:    "supervise JOBDIR",
		Short:  "Run one job for the host daemon (internal)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if code := supervisor.Run(args[0]); code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
}

func (a *app) runUp(ctx context.Context, o upOptions) error {
	stateDir, socket, err := o.host.resolve()
	if err != nil {
		return err
	}
	if err := server.CheckSocketPath(socket); err != nil {
		return usageError("%v", err)
	}
	mode, err := strconv.ParseUint(o.socketMode, 8, 32)
	if err != nil || mode > 0o777 {
		return usageError("--socket-mode: must be an octal file mode in [0000, 0777] such as 0600, got %q", o.socketMode)
	}
	if o.httpAddr != "" {
		if err := checkLoopback(o.httpAddr); err != nil {
			return asUsage(err)
		}
	}
	if o.stopGrace <= 0 {
		return usageError("--stop-grace: must be a positive duration such as 10s, got %s", o.stopGrace)
	}
	if o.policy != "" {
		if _, err := placement.Canonical(o.policy); err != nil {
			return usageError("--policy: must be one of %s, or %s (the same as %s), got %q", strings.Join(placement.Names(), ", "), placement.DefaultAlias, placement.DefaultPolicy, o.policy)
		}
	}
	settings, err := hostSettings(o)
	if err != nil {
		return err
	}
	sharing, err := sharingMode(o)
	if err != nil {
		return asUsage(err)
	}
	idle, err := idleRule(o.idleBelow, o.idleAfter)
	if err != nil {
		return asUsage(err)
	}
	lib, err := findInterceptLib(o.interceptLib)
	if err != nil {
		return asUsage(err)
	}
	// Before anything is written in it: a state folder another user could
	// change would let them point the daemon's writes anywhere.
	if err := safefs.PrepareStateDir(stateDir, "state folder"); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	srcName, simulated, nodes, err := a.discoverHost(ctx, o.simulate)
	if err != nil {
		return err
	}
	mig, closeMIG, err := a.managedMIG(nodes, simulated, o.migManaged)
	if err != nil {
		return err
	}
	defer closeMIG()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the tessera binary for job supervisors: %w", err)
	}
	// The node arbiter gates every job's kernel launches to its shares.
	capacity := map[string]uint64{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			capacity[g.UUID] = uint64(g.MemoryMiB) << 20
		}
	}
	arbCfg := arbiter.Config{Mode: sharing, Capacity: capacity, Idle: idle, KeepIdleGuarantee: !o.lendIdle, Logger: a.log}
	if sharing == arbiter.ModeMPS {
		if arbCfg.MPS, err = mpsConfig(o, stateDir, srcName, simulated, nodes); err != nil {
			return err
		}
		// The MPS pipes under the state folder are the daemon user's: made
		// owner-only before the control daemons make their folders (0755)
		// in it, since --socket-mode may make the state folder traversable.
		if rel, err := filepath.Rel(stateDir, arbCfg.MPS.Root); err == nil && filepath.IsLocal(rel) {
			if err := safefs.MkdirAll(stateDir, filepath.ToSlash(rel), 0o700); err != nil {
				return fmt.Errorf("--mps-root %s: %w", arbCfg.MPS.Root, err)
			}
		}
		fmt.Fprintf(a.stderr, "tessera: sharing GPUs with NVIDIA MPS: one control daemon per GPU under %s (%s); jobs take one GPU each\n", arbCfg.MPS.Root, arbCfg.MPS.Binary)
	}
	// On real GPUs, NVML's per-process utilisation turns launch tokens
	// into GPU time (docs/enforcement.md, "Meter"); MPS needs none.
	jobs := &hostd.JobTree{}
	if simulated && sharing == arbiter.ModeTokens {
		// Simulated GPUs measure too: each job's declared load, labelled
		// simulated (docs/host.md, "Use beside booking").
		arbCfg.Meter = &hostd.SimMeter{Jobs: jobs, Log: a.log}
	}
	if !simulated && sharing == arbiter.ModeTokens {
		m, err := hostd.NVMLMeter(jobs, a.log)
		if err != nil {
			a.log.Warn("no GPU utilisation meter: compute limits cap launch rate, not GPU time", "err", err)
		} else {
			defer m.Close()
			arbCfg.Meter = m
		}
	}
	arb, err := arbiter.New(arbCfg)
	if err != nil {
		return fmt.Errorf("node arbiter: %w", err)
	}
	// The arbiter stops after the daemon; in MPS mode its Run returns once
	// the control daemons have been told to quit.
	arbCtx, stopArbiter := context.WithCancel(ctx)
	arbDone := make(chan struct{})
	defer func() {
		stopArbiter()
		<-arbDone
	}()
	go func() {
		defer close(arbDone)
		if err := arb.Run(arbCtx); err != nil {
			a.log.Error("node arbiter stopped", "err", err)
		}
	}()
	containment, err := containMode(o.contain)
	if err != nil {
		return err
	}
	jobUser, err := jobUserOf(o.jobUser)
	if err != nil {
		return err
	}
	if o.recover {
		if err := a.recoverState(stateDir); err != nil {
			return err
		}
	}
	d, err := hostd.New(hostd.Config{
		StateDir: stateDir, Source: srcName, Simulated: simulated, Nodes: nodes, Catalog: a.catalog,
		Policy: o.policy, Supervisor: []string{exe, "supervise"}, InterceptLib: lib,
		Arbiter: hostd.ArbiterSeat{Enforcer: arbiter.Enforcer{Arbiter: arb}, Log: a.log},
		Sharing: sharing, Contain: containment, JobUser: jobUser, RuntimeDir: o.runtimeDir,
		StopGrace: o.stopGrace, Log: a.log, MIG: mig,
		Queues: settings.Queues, DisablePreemption: settings.DisablePreemption, PreemptionMinRuntime: *settings.MinRuntime,
	})
	if errors.Is(err, hostd.ErrNoCgroup) {
		return fmt.Errorf("--contain cgroup: %w; run with --contain auto or mark, or start the daemon where it may create cgroups (as root, or in a delegated systemd unit: systemd-run --user -p Delegate=yes tessera up)", err)
	}
	if errors.Is(err, store.ErrDamaged) {
		return fmt.Errorf("%w\nNothing was changed and no job was started or stopped. To start anyway, run tessera up --recover: it keeps the damaged file aside as jobs.db.damaged-TIME and rebuilds the job list from the job folders (docs/host.md, \"Failure and recovery\")", err)
	}
	if err != nil {
		return err
	}
	jobs.Set(d)
	defer d.Close()
	return a.serve(ctx, d, socket, os.FileMode(mode), o.httpAddr, lib)
}

// managedMIG marks the GPUs --mig-managed names as managed in nodes and,
// on real GPUs, returns the manager that creates and destroys their
// instances through NVML (nil on simulated GPUs, where the daemon
// simulates creation, and when no GPU is managed).
func (a *app) managedMIG(nodes []inventory.Node, simulated bool, flag string) (hostd.MIGInstances, func(), error) {
	var managed []string
	for i := range nodes {
		m, err := discovery.MarkMIGManaged(&nodes[i], a.catalog, "--mig-managed", flag)
		if err != nil {
			return nil, nil, err
		}
		managed = append(managed, m...)
	}
	if len(managed) == 0 {
		return nil, func() {}, nil
	}
	if simulated {
		fmt.Fprintf(a.stderr, "tessera: managing the MIG layout of %d simulated GPUs (instances are simulated)\n", len(managed))
		return nil, func() {}, nil
	}
	var mgrs []*migctl.Manager
	var closes []func()
	closeAll := func() {
		for _, c := range closes {
			c()
		}
	}
	for _, n := range nodes {
		mgr, c, err := migctl.ForNode(n, a.catalog, false)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--mig-managed %s: %w", flag, err)
		}
		closes = append(closes, c)
		if mgr != nil {
			mgrs = append(mgrs, mgr)
		}
	}
	if len(mgrs) != 1 {
		closeAll()
		return nil, nil, fmt.Errorf("--mig-managed %s: the host daemon manages the GPUs of one host, got %d hosts with managed GPUs", flag, len(mgrs))
	}
	fmt.Fprintf(a.stderr, "tessera: managing the MIG layout of %d GPUs: %s\n", len(managed), strings.Join(managed, ", "))
	return mgrs[0], closeAll, nil
}

// recoverState rebuilds the job database of stateDir and says what it did.
func (a *app) recoverState(stateDir string) error {
	rep, err := store.Recover(stateDir, time.Now())
	if err != nil {
		return fmt.Errorf("--recover: %w", err)
	}
	if rep.KeptAside != "" {
		fmt.Fprintf(a.stderr, "tessera: kept the old job database as %s\n", rep.KeptAside)
	}
	fmt.Fprintf(a.stderr, "tessera: rebuilt the job database: %d jobs from their folders' records, %d from the old database, %d rebuilt from their spec and exit status (marked lost when it had none); the next job is %s\n",
		len(rep.FromMirror), len(rep.FromDatabase), len(rep.Rebuilt), rep.NextID)
	return nil
}

// idleRule is the idle-holder rule --idle-below and --idle-after give
// (tessera up's and tessera agent's).
func idleRule(idleBelow string, idleAfter time.Duration) (gpuuse.IdleRule, error) {
	below, err := quantity.ParseShare(idleBelow)
	if err != nil {
		return gpuuse.IdleRule{}, fmt.Errorf("--idle-below: must be a GPU share such as 0.05 or 5%%: %w", err)
	}
	r := gpuuse.IdleRule{BelowMilli: below, After: idleAfter}
	if err := r.Validate("--idle-below", "--idle-after"); err != nil {
		return gpuuse.IdleRule{}, err
	}
	return r, nil
}

// hostSettings reads --config and applies the preemption flags over it.
func hostSettings(o upOptions) (hostd.Settings, error) {
	var s hostd.Settings
	if o.config != "" {
		var err error
		if s, err = hostd.LoadConfigFile(o.config); err != nil {
			return hostd.Settings{}, fmt.Errorf("--config: %w", err)
		}
	}
	if o.minRuntime < 0 {
		return hostd.Settings{}, usageError("--preemption-min-runtime: must be a duration >= 0 such as 1m, got %s", o.minRuntime)
	}
	if o.minRuntimeSet || s.MinRuntime == nil {
		s.MinRuntime = &o.minRuntime
	}
	s.DisablePreemption = s.DisablePreemption || o.noPreempt
	return s, nil
}

func (a *app) serve(ctx context.Context, d *hostd.Daemon, socket string, mode os.FileMode, httpAddr, lib string) error {
	notes, err := server.PrepareSocketDir(d.StateDir(), socket, mode)
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(a.stderr, "tessera: %s\n", n)
	}
	opts := server.Options{Log: a.log}
	if httpAddr != "" {
		token, path, created, err := server.EnsureToken(d.StateDir())
		if err != nil {
			return fmt.Errorf("--http: %w", err)
		}
		opts.Token, opts.TokenFile = token, path
		if created {
			fmt.Fprintf(a.stderr, "tessera: API token for --http (shown this once; kept in %s, mode 0600, where the tessera CLI of this user reads it; others set %s): %s\n", path, api.TokenEnv, token)
		} else {
			fmt.Fprintf(a.stderr, "tessera: API token for --http in %s\n", path)
		}
	}
	h, err := server.Handler(d, opts)
	if err != nil {
		return err
	}
	ln, err := server.ListenUnix(socket, mode)
	if err != nil {
		return err
	}
	defer os.Remove(socket)
	listeners := []net.Listener{ln}
	if httpAddr != "" {
		hl, err := net.Listen("tcp", httpAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("--http %s: %w", httpAddr, err)
		}
		listeners = append(listeners, hl)
		httpAddr = hl.Addr().String()
	}
	// Requests run under reqCtx, cancelled at shutdown so that long polls
	// (wait, followed logs) end at once; clients resume against the next daemon.
	reqCtx, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	srv := &http.Server{
		Handler: h, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return reqCtx },
		// The API's guard needs each connection's peer uid or address.
		ConnContext: server.ConnContext,
	}
	errs := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() { errs <- srv.Serve(l) }()
	}
	if lib == "" {
		lib = "none found (jobs run without the interception library; build it with make -C intercept)"
	}
	fmt.Fprintf(a.stderr, "tessera: daemon up; socket %s, state %s, interception library: %s\n", socket, d.StateDir(), lib)
	if httpAddr != "" {
		fmt.Fprintf(a.stderr, "tessera: dashboard http://%s/ , metrics http://%s/metrics ; API over TCP: tessera ps --addr http://%s\n", httpAddr, httpAddr, httpAddr)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(runCtx) }()
	select {
	case <-ctx.Done():
	case err := <-errs:
		if !errors.Is(err, http.ErrServerClosed) {
			cancel()
			<-runErr
			return fmt.Errorf("serve: %w", err)
		}
	}
	endRequests()
	shutCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer done()
	_ = srv.Shutdown(shutCtx)
	cancel()
	if err := <-runErr; err != nil {
		return err
	}
	fmt.Fprintln(a.stderr, "tessera: daemon stopped; running jobs keep running and are re-adopted by the next `tessera up`")
	return nil
}

func (a *app) discoverHost(ctx context.Context, simulate string) (string, bool, []inventory.Node, error) {
	source := "auto"
	if simulate != "" {
		source = "sim:" + simulate
	}
	src, err := discovery.Open(source, a.catalog)
	if err != nil {
		return "", false, nil, usageError("--simulate %s: %v", simulate, err)
	}
	nodes, err := src.Discover(ctx)
	if err != nil {
		if simulate != "" {
			return "", false, nil, fmt.Errorf("--simulate %s: %w", simulate, err)
		}
		return "", false, nil, fmt.Errorf("discover GPUs: %w", err)
	}
	simulated := simulate != ""
	if auto, ok := src.(*discovery.Auto); ok && auto.Simulated() {
		simulated = true
		fmt.Fprintf(a.stderr, "note: no NVIDIA GPU found; using simulated GPUs (%s). Jobs run for real, on pretend devices.\n", src.Name())
	} else if simulated {
		fmt.Fprintf(a.stderr, "note: using simulated GPUs (%s) as asked by --simulate\n", src.Name())
	}
	return src.Name(), simulated, nodes, nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err == nil {
		ip := net.ParseIP(host)
		if host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("--http: must be a loopback address such as 127.0.0.1:9400 or [::1]:9400 (the API runs commands; it is not for the network), got %q", addr)
}

// findInterceptLib returns the library to preload: the flag's (which must
// exist), else the first built one found, else "".
func findInterceptLib(flag string) (string, error) {
	if flag != "" {
		abs, err := filepath.Abs(flag)
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(abs); err == nil && fi.IsDir() {
				err = errors.New("is a folder")
			}
		}
		if err != nil {
			return "", fmt.Errorf("--intercept-lib: must be an existing library file, got %q (%v)", flag, err)
		}
		return abs, nil
	}
	var cands []string
	if wd, err := os.Getwd(); err == nil {
		cands = append(cands, filepath.Join(wd, "intercept", "build", interceptLibName))
	}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(exe), "..", "intercept", "build", interceptLibName))
	}
	cands = append(cands, filepath.Join("/usr/local/lib/tessera", interceptLibName))
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return filepath.Clean(c), nil
		}
	}
	return "", nil
}

// containMode reads --contain.
func containMode(v string) (hostd.Containment, error) {
	switch v {
	case "auto":
		return hostd.ContainAuto, nil
	case string(hostd.ContainCgroup), string(hostd.ContainMark):
		return hostd.Containment(v), nil
	}
	return "", usageError("--contain: must be auto, cgroup or mark, got %q", v)
}

// jobUserOf resolves --job-user: nil for none (jobs of root run as root).
// A daemon not running as root runs every job as itself: naming another
// user is refused, naming itself changes nothing.
func jobUserOf(flag string) (*supervisor.User, error) {
	if flag == "" {
		return nil, nil
	}
	u, err := supervisor.LookupUser(flag)
	if err != nil {
		return nil, usageError("--job-user: %v", err)
	}
	euid := os.Geteuid()
	switch {
	case euid == 0:
		return &u, nil
	case u.UID == uint32(euid):
		return nil, nil
	default:
		return nil, usageError("--job-user: must be this daemon's own user (uid %d) when tessera up does not run as root, got %q (%s): only root can start jobs as another user; start tessera up as root, or leave --job-user out", euid, flag, u)
	}
}
