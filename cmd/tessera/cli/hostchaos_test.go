package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/client"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// Environment knobs of TestHostChaos, to replay a failure or run longer.
const (
	hostChaosSeedEnv = "TESSERA_HOST_CHAOS_SEED"
	hostChaosJobsEnv = "TESSERA_HOST_CHAOS_JOBS"
)

// TestHostChaos runs a few hundred short jobs over several queues on a
// `tessera up` process while it kills, at seeded random moments, the daemon
// (SIGKILL, and SIGTERM), job supervisors (also while the daemon is down)
// and jobs' main processes, restarting the daemon each time. Some jobs
// leave a setsid'd child behind. It checks, from outside the daemon:
//
//   - no GPU ever runs more guaranteed compute than it has: a sampler reads
//     the shares of every live job process from /proc and sums them per GPU
//     (a sum over 1 counts only when all its processes are still alive
//     after the scan, so they ran at one instant);
//   - no process of a job reported final is alive;
//   - every accepted submission is one job, IDs are unique, every job ends,
//     and a final state never changes;
//   - no job runs twice; a job no fault touched ends as its command does,
//     with its output intact, whatever happened to the daemon.
//
// Every injection is logged with the seed; replay one with
// TESSERA_HOST_CHAOS_SEED=N (and TESSERA_HOST_CHAOS_JOBS=N for more jobs).
func TestHostChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real daemons and jobs for about half a minute")
	}
	runHostChaos(t, "auto", 240)
}

// TestHostChaosMarks is TestHostChaos with jobs found by their environment
// mark alone (tessera up --contain mark), on fewer jobs.
func TestHostChaosMarks(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real daemons and jobs for about fifteen seconds")
	}
	runHostChaos(t, "mark", 80)
}

func runHostChaos(t *testing.T, containment string, jobs int) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(hostChaosSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", hostChaosSeedEnv, s, err)
		}
		seed = v
	}
	if s := os.Getenv(hostChaosJobsEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q: want a positive number", hostChaosJobsEnv, s)
		}
		jobs = v
	}
	t.Logf("seed %d (replay with %s=%d), %d jobs, --contain %s", seed, hostChaosSeedEnv, seed, jobs, containment)

	c := newHostChaos(t, seed, containment)
	c.daemon.start()
	defer c.daemon.kill()
	defer c.cleanup()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); c.sample(ctx) }()
	go func() { defer bg.Done(); c.watchFinal(ctx) }()

	injectDone := make(chan struct{})
	submitted := make(chan struct{})
	go func() {
		defer close(injectDone)
		c.inject(ctx, submitted)
	}()
	c.submitAll(ctx, jobs)
	close(submitted)
	<-injectDone

	c.daemon.ensureUp()
	final := c.waitAllFinal(ctx, 3*time.Minute)
	cancel()
	bg.Wait()
	c.check(final)
	if t.Failed() {
		t.Logf("injections (seed %d):\n%s", seed, strings.Join(c.injections(), "\n"))
		t.Logf("daemon log of the jobs named above:\n%s", c.daemon.logOf(c.namedJobs()))
	} else {
		t.Logf("%d jobs, %d sampler scans, injections: %s", len(final), c.scans, injectionKinds(c.injections()))
	}
}

// injectionKinds counts the injections by kind.
func injectionKinds(lines []string) string {
	kinds := map[string]int{}
	for _, l := range lines {
		switch {
		case strings.Contains(l, "daemon: SIGKILL"):
			kinds["daemon SIGKILL"]++
		case strings.Contains(l, "daemon: SIGTERM"):
			kinds["daemon SIGTERM"]++
		case strings.Contains(l, "while the daemon is down"):
			kinds["supervisor SIGKILL, daemon down"]++
		case strings.Contains(l, "supervisor"):
			kinds["supervisor SIGKILL"]++
		case strings.Contains(l, "main process"):
			kinds["job SIGKILL"]++
		}
	}
	var out []string
	for k, n := range kinds {
		out = append(out, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// chaosJob is what a submission asked for and what the test expects.
type chaosJob struct {
	token    string // CHAOS_SUB, unique per submission
	queue    string
	fraction string
	code     int  // exit code the command ends with
	escape   bool // leaves a setsid'd child behind
	id       string
	unknown  bool // the answer was lost: the job may or may not exist
}

type hostChaos struct {
	t      *testing.T
	rng    *rand.Rand
	run    string // CHAOS_RUN: marks this test's job processes
	ledger string // each job appends "ID PID" when it starts
	daemon *chaosDaemon
	cl     *client.Client

	obsMu sync.Mutex // one fetchObserve at a time

	mu       sync.Mutex
	subs     []*chaosJob
	touched  map[string]string // job ID -> fault that hit it
	injected []string
	firstFin map[string]api.State
	errs     []string
	scans    int
}

func newHostChaos(t *testing.T, seed uint64, containment string) *hostChaos {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	sock := filepath.Join(dir, "api.sock")
	c := &hostChaos{
		t:        t,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		run:      dir,
		ledger:   filepath.Join(dir, "starts"),
		cl:       client.New(sock),
		touched:  map[string]string{},
		firstFin: map[string]api.State{},
	}
	c.daemon = &chaosDaemon{t: t, state: state, sock: sock, contain: containment, logPath: filepath.Join(dir, "daemon.log"), cl: c.cl}
	return c
}

func (c *hostChaos) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) < 50 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

func (c *hostChaos) note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.injected = append(c.injected, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (c *hostChaos) injections() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.injected...)
}

// script is every job's command: record the start, maybe leave a child
// behind, work a little, print one line and end with CODE.
const chaosScript = `echo "$TESSERA_JOB_ID $$" >> "$LEDGER"
if [ "$ESCAPE" = 1 ]; then setsid sleep 60 & fi
sleep "$DUR"
echo "out $TESSERA_JOB_ID"
exit "$CODE"`

// submitAll submits n jobs from three goroutines (one per queue); a
// submission refused because the daemon is down is retried, one whose
// answer was lost is recorded as unknown.
func (c *hostChaos) submitAll(ctx context.Context, n int) {
	queues := []string{"alpha", "beta", "gamma"}
	fractions := []string{"0.25", "0.5", "1"}
	c.mu.Lock()
	for i := 0; i < n; i++ {
		code := 0
		if c.rng.IntN(5) == 0 {
			code = 3
		}
		c.subs = append(c.subs, &chaosJob{
			token:    strconv.Itoa(i),
			queue:    queues[i%len(queues)],
			fraction: fractions[c.rng.IntN(len(fractions))],
			code:     code,
			escape:   c.rng.IntN(4) == 0,
		})
	}
	durs := make([]string, n)
	for i := range durs {
		durs[i] = fmt.Sprintf("0.%02d", 2+c.rng.IntN(20))
	}
	subs := c.subs
	c.mu.Unlock()

	var wg sync.WaitGroup
	for q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := q; i < len(subs); i += len(queues) {
				c.submit(ctx, subs[i], durs[i])
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

func (c *hostChaos) submit(ctx context.Context, j *chaosJob, dur string) {
	escape := "0"
	if j.escape {
		escape = "1"
	}
	req := api.SubmitRequest{
		GPU:     map[string]string{"compute": j.fraction},
		Command: []string{"/bin/sh", "-c", chaosScript},
		Env: []string{
			"PATH=/usr/bin:/bin", "CHAOS_RUN=" + c.run, "CHAOS_SUB=" + j.token, "LEDGER=" + c.ledger,
			"DUR=" + dur, "CODE=" + strconv.Itoa(j.code), "ESCAPE=" + escape,
		},
		Queue: j.queue,
	}
	for ctx.Err() == nil {
		got, err := c.cl.Submit(ctx, req)
		if err == nil {
			c.mu.Lock()
			j.id = got.ID
			c.mu.Unlock()
			return
		}
		var apiErr *client.APIError
		switch {
		case errors.As(err, &apiErr):
			c.fail("submission %s refused: %v", j.token, err)
			return
		case notSent(err):
			time.Sleep(20 * time.Millisecond) // the daemon is down: retry
		default:
			c.mu.Lock()
			j.unknown = true
			c.mu.Unlock()
			return
		}
	}
}

// notSent says the request never reached a daemon (nothing listened).
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// inject applies a random fault every 100-300ms until the submissions
// are in and at most two jobs are left to end (so the last ones end
// undisturbed and the test ends).
func (c *hostChaos) inject(ctx context.Context, submitted <-chan struct{}) {
	for ctx.Err() == nil {
		select {
		case <-submitted:
			if c.unfinished(ctx) <= 2 {
				return
			}
		default:
		}
		c.mu.Lock()
		wait := time.Duration(100+c.rng.IntN(200)) * time.Millisecond
		roll := c.rng.IntN(100)
		c.mu.Unlock()
		time.Sleep(wait)
		switch {
		case roll < 12:
			c.daemon.kill()
			c.note("daemon: SIGKILL")
			if c.pick(2) == 0 {
				c.killSupervisor(ctx, "while the daemon is down")
			}
			time.Sleep(time.Duration(c.pick(150)) * time.Millisecond)
			c.daemon.start()
			c.note("daemon: restarted")
		case roll < 18:
			c.daemon.term()
			c.note("daemon: SIGTERM")
			c.daemon.start()
			c.note("daemon: restarted")
		case roll < 50:
			c.killSupervisor(ctx, "")
		case roll < 85:
			c.killJobProcess(ctx)
		}
	}
}

// unfinished counts the jobs not yet final (a large number while the
// daemon cannot answer).
func (c *hostChaos) unfinished(ctx context.Context) int {
	if !c.daemon.up() {
		return 1 << 30
	}
	jobs, err := c.cl.Jobs(ctx)
	if err != nil {
		return 1 << 30
	}
	n := 0
	for _, j := range jobs {
		if !j.State.Final() {
			n++
		}
	}
	return n
}

func (c *hostChaos) pick(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// running returns the running jobs, from the daemon or (while it is down)
// from the job records it last wrote.
func (c *hostChaos) running(ctx context.Context) []api.Job {
	var jobs []api.Job
	if c.daemon.up() {
		all, err := c.cl.Jobs(ctx)
		if err != nil {
			return nil
		}
		jobs = all
	} else {
		recs, _ := filepath.Glob(filepath.Join(c.daemon.state, "jobs", "*", "record.json"))
		for _, r := range recs {
			data, err := os.ReadFile(r)
			var j api.Job
			if err == nil && json.Unmarshal(data, &j) == nil {
				jobs = append(jobs, j)
			}
		}
	}
	var out []api.Job
	for _, j := range jobs {
		if j.State == api.Running && j.SupervisorPID > 0 {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Seq < out[b].Seq })
	return out
}

func (c *hostChaos) killSupervisor(ctx context.Context, when string) {
	run := c.running(ctx)
	if len(run) == 0 {
		return
	}
	j := run[c.pick(len(run))]
	if ok, _ := supervisor.Alive(j.SupervisorPID, j.SupervisorStart); !ok {
		return
	}
	if err := syscall.Kill(j.SupervisorPID, syscall.SIGKILL); err != nil {
		return
	}
	c.mu.Lock()
	c.touched[j.ID] = "supervisor killed"
	c.mu.Unlock()
	c.note("%s: supervisor %d SIGKILL %s", j.ID, j.SupervisorPID, when)
}

// killJobProcess kills the main process of a job that has started.
func (c *hostChaos) killJobProcess(ctx context.Context) {
	starts := c.starts()
	run := c.running(ctx)
	if len(run) == 0 {
		return
	}
	j := run[c.pick(len(run))]
	pids := starts[j.ID]
	if len(pids) == 0 {
		return
	}
	pid := pids[0]
	// Kill only the job's shell, identified by its environment.
	if id, ok := procJobID(pid, c.run); !ok || id != j.ID {
		return
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return
	}
	c.mu.Lock()
	c.touched[j.ID] = "main process killed"
	c.mu.Unlock()
	c.note("%s: main process %d SIGKILL", j.ID, pid)
}

// starts reads the ledger: job ID -> the pids it started with (one per start).
func (c *hostChaos) starts() map[string][]int {
	out := map[string][]int{}
	data, err := os.ReadFile(c.ledger)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		pid, err := strconv.Atoi(f[1])
		if err == nil {
			out[f[0]] = append(out[f[0]], pid)
		}
	}
	return out
}

// chaosProc is one live process of a job of this test.
type chaosProc struct {
	pid   int
	start uint64
	job   string
	gpus  []string
	milli []int
}

// scanJobProcs lists the live processes of this test's jobs.
func scanJobProcs(run string) []chaosProc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []chaosProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, ok := procEnv(pid, run)
		if !ok {
			continue
		}
		start, _, alive, err := supervisor.ProcStart(pid)
		if err != nil || !alive {
			continue
		}
		p := chaosProc{pid: pid, start: start, job: env["TESSERA_JOB_ID"]}
		if u := env["TESSERA_GPU_UUIDS"]; u != "" {
			p.gpus = strings.Split(u, ",")
		}
		for _, m := range strings.Split(env["TESSERA_COMPUTE_REQUEST"], ",") {
			v, err := strconv.Atoi(strings.TrimSuffix(m, "m"))
			if err == nil {
				p.milli = append(p.milli, v)
			}
		}
		out = append(out, p)
	}
	return out
}

// procEnv returns the environment of pid when it is a job of this test.
func procEnv(pid int, run string) (map[string]string, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil || !bytes.Contains(data, []byte("CHAOS_RUN="+run+"\x00")) {
		return nil, false
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	return env, env["CHAOS_RUN"] == run
}

func procJobID(pid int, run string) (string, bool) {
	env, ok := procEnv(pid, run)
	return env["TESSERA_JOB_ID"], ok
}

// sample sums the guaranteed compute of live job processes per GPU.
func (c *hostChaos) sample(ctx context.Context) {
	for ctx.Err() == nil {
		procs := scanJobProcs(c.run)
		byGPU := map[string]map[string]int{} // GPU -> job -> milli
		members := map[string][]chaosProc{}
		for _, p := range procs {
			members[p.job] = append(members[p.job], p)
			for i, g := range p.gpus {
				if i < len(p.milli) {
					if byGPU[g] == nil {
						byGPU[g] = map[string]int{}
					}
					byGPU[g][p.job] = p.milli[i]
				}
			}
		}
		for gpu, jobs := range byGPU {
			sum := 0
			for _, m := range jobs {
				sum += m
			}
			if sum <= 1000 {
				continue
			}
			// Over 1 GPU only if all these jobs are still running now.
			var names []string
			all := true
			for job := range jobs {
				alive := false
				for _, p := range members[job] {
					if ok, _ := supervisor.Alive(p.pid, p.start); ok {
						alive = true
					}
				}
				all = all && alive
				names = append(names, fmt.Sprintf("%s(%dm)", job, jobs[job]))
			}
			if all {
				sort.Strings(names)
				c.fail("GPU %s runs %dm of guaranteed compute at once: %s", gpu, sum, strings.Join(names, " "))
			}
		}
		c.mu.Lock()
		c.scans++
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// watchFinal polls the daemon: a final state must never change, and no
// process of a final job may be alive.
func (c *hostChaos) watchFinal(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(30 * time.Millisecond)
		_, _ = c.fetchObserve(ctx)
	}
}

// fetchObserve lists the jobs and observes them; one fetch at a time, so
// an older answer is never observed after a newer one.
func (c *hostChaos) fetchObserve(ctx context.Context) ([]api.Job, error) {
	c.obsMu.Lock()
	defer c.obsMu.Unlock()
	jobs, err := c.cl.JobsWithEnv(ctx, true)
	if err == nil {
		c.observe(jobs)
	}
	return jobs, err
}

func (c *hostChaos) observe(jobs []api.Job) {
	final := map[string]bool{}
	c.mu.Lock()
	for _, j := range jobs {
		if !j.State.Final() {
			if was, ok := c.firstFin[j.ID]; ok {
				c.errs = append(c.errs, fmt.Sprintf("%s was %s, then %s", j.ID, was, j.State))
			}
			continue
		}
		final[j.ID] = true
		if was, ok := c.firstFin[j.ID]; ok && was != j.State {
			c.errs = append(c.errs, fmt.Sprintf("%s was %s, then %s", j.ID, was, j.State))
		}
		if _, ok := c.firstFin[j.ID]; !ok {
			c.firstFin[j.ID] = j.State
		}
	}
	c.mu.Unlock()
	for _, p := range scanJobProcs(c.run) {
		if final[p.job] {
			if ok, _ := supervisor.Alive(p.pid, p.start); ok {
				c.fail("%s is final but its process %d is alive", p.job, p.pid)
			}
		}
	}
}

// waitAllFinal waits until every job the daemon knows has ended.
func (c *hostChaos) waitAllFinal(ctx context.Context, limit time.Duration) []api.Job {
	deadline := time.Now().Add(limit)
	for {
		jobs, err := c.fetchObserve(ctx)
		if err == nil {
			done := true
			for _, j := range jobs {
				done = done && j.State.Final()
			}
			if done {
				return jobs
			}
		}
		if time.Now().After(deadline) {
			var open []string
			for _, j := range jobs {
				if !j.State.Final() {
					open = append(open, j.ID+" "+string(j.State))
				}
			}
			c.t.Errorf("jobs not final after %s: %v (err %v)", limit, open, err)
			return jobs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *hostChaos) check(jobs []api.Job) {
	t := c.t
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		t.Error(e)
	}
	errorf := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		c.errs = append(c.errs, msg)
		t.Error(msg)
	}
	byToken := map[string][]api.Job{}
	ids := map[string]bool{}
	for _, j := range jobs {
		if ids[j.ID] {
			errorf("job ID %s listed twice", j.ID)
		}
		ids[j.ID] = true
		for _, kv := range j.Env {
			if tok, ok := strings.CutPrefix(kv, "CHAOS_SUB="); ok {
				byToken[tok] = append(byToken[tok], j)
			}
		}
	}
	for _, e := range replayBookings(filepath.Join(c.daemon.state, hostd.BookingsFile)) {
		errorf("booking journal: %s", e)
	}
	starts := c.starts()
	for id, pids := range starts {
		if len(pids) > 1 {
			errorf("%s started %d times (pids %v)", id, len(pids), pids)
		}
	}
	accounted := 0
	for _, s := range c.subs {
		got := byToken[s.token]
		switch {
		case s.unknown && len(got) <= 1:
			accounted += len(got)
			continue
		case s.id == "":
			errorf("submission %s was never accepted", s.token)
			continue
		case len(got) != 1 || got[0].ID != s.id:
			errorf("submission %s (accepted as %s) is %d jobs", s.token, s.id, len(got))
			continue
		}
		accounted++
		j := got[0]
		if fault, hit := c.touched[j.ID]; hit {
			_ = fault // any final state will do
			continue
		}
		want := api.Succeeded
		if s.code != 0 {
			want = api.Failed
		}
		if j.State != want || j.ExitCode == nil || *j.ExitCode != s.code {
			errorf("%s (no fault hit it) ended %s exit %v (%s), want %s exit %d", j.ID, j.State, fmtCode(j.ExitCode), j.Reason, want, s.code)
			continue
		}
		if n := len(starts[j.ID]); n != 1 {
			errorf("%s ended %s but started %d times", j.ID, j.State, n)
		}
		out, err := os.ReadFile(filepath.Join(c.daemon.state, "jobs", j.ID, "stdout.log"))
		if err != nil || string(out) != "out "+j.ID+"\n" {
			errorf("%s's output %q (%v), want %q", j.ID, out, err, "out "+j.ID+"\n")
		}
	}
	if accounted != len(jobs) {
		errorf("the daemon lists %d jobs, the submissions account for %d", len(jobs), accounted)
	}
	for _, p := range scanJobProcs(c.run) {
		errorf("process %d of %s still runs after every job ended", p.pid, p.job)
	}
}

// replayBookings replays the daemon's booking journal and returns what
// broke: a GPU booked over its whole compute, a job booked twice in one
// daemon's life, or released without being booked.
func replayBookings(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var errs []string
	var booked map[string]int64           // GPU -> compute booked
	var jobs map[string][]hostd.BookedGPU // job -> its bookings
	starts := 0
	for n, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var b hostd.Booking
		if err := json.Unmarshal([]byte(line), &b); err != nil {
			errs = append(errs, fmt.Sprintf("line %d: %v", n+1, err))
			continue
		}
		switch b.Op {
		case "start":
			starts++
			booked, jobs = map[string]int64{}, map[string][]hostd.BookedGPU{}
		case "book":
			if booked == nil || jobs[b.Job] != nil {
				errs = append(errs, fmt.Sprintf("line %d: %s booked twice (or before a daemon start)", n+1, b.Job))
				continue
			}
			jobs[b.Job] = b.GPUs
			for _, g := range b.GPUs {
				if booked[g.UUID] += g.ComputeMilli; booked[g.UUID] > 1000 {
					errs = append(errs, fmt.Sprintf("line %d: booking %s puts GPU %s at %dm of 1000m", n+1, b.Job, g.UUID, booked[g.UUID]))
				}
			}
		case "release":
			if booked == nil || jobs[b.Job] == nil {
				errs = append(errs, fmt.Sprintf("line %d: %s released but not booked", n+1, b.Job))
				continue
			}
			delete(jobs, b.Job)
			for _, g := range b.GPUs {
				booked[g.UUID] -= g.ComputeMilli
			}
		default:
			errs = append(errs, fmt.Sprintf("line %d: unknown op %q", n+1, b.Op))
		}
	}
	if starts == 0 {
		errs = append(errs, "no daemon start recorded")
	}
	return errs
}

func fmtCode(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
}

// cleanup kills whatever of this test's jobs survived a failed run.
func (c *hostChaos) cleanup() {
	for _, p := range scanJobProcs(c.run) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// chaosDaemon is a `tessera up --simulate 2xH100` process (this test
// binary standing in for tessera).
type chaosDaemon struct {
	t       *testing.T
	state   string
	sock    string
	contain string // --contain
	logPath string
	cl      *client.Client
	mu      sync.Mutex
	cmd     *exec.Cmd
	waited  chan struct{}
}

func (d *chaosDaemon) start() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return
	}
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "up", "--simulate", "2xH100", "--state-dir", d.state, "--socket", d.sock, "--contain", d.contain, "--log-level", "info")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), cliSuperviseEnv+"=1")
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("start tessera up: %v", err)
	}
	d.cmd, d.waited = cmd, make(chan struct{})
	go func(w chan struct{}) { _ = cmd.Wait(); close(w) }(d.waited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := d.cl.Status(context.Background()); err == nil {
			return
		}
		select {
		case <-d.waited:
			d.cmd = nil
			d.t.Fatalf("tessera up exited at start:\n%s", d.logTailLocked())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("tessera up did not answer in 30s:\n%s", d.logTailLocked())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *chaosDaemon) signal(sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.waited:
	case <-time.After(30 * time.Second):
		d.t.Errorf("tessera up did not end 30s after %v", sig)
		_ = d.cmd.Process.Kill()
		<-d.waited
	}
	d.cmd = nil
}

func (d *chaosDaemon) kill() { d.signal(syscall.SIGKILL) }
func (d *chaosDaemon) term() { d.signal(syscall.SIGTERM) }

func (d *chaosDaemon) up() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cmd != nil
}

func (d *chaosDaemon) ensureUp() {
	if !d.up() {
		d.start()
	}
}

// logOf returns the daemon log's lines that name one of ids (the last 200).
func (d *chaosDaemon) logOf(ids map[string]bool) string {
	data, _ := os.ReadFile(d.logPath)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		for _, w := range jobWord.FindAllString(line, -1) {
			if ids[w] {
				out = append(out, line)
				break
			}
		}
	}
	if len(out) > 200 {
		out = out[len(out)-200:]
	}
	return strings.Join(out, "\n")
}

var jobWord = regexp.MustCompile(`job-[0-9]+`)

// namedJobs are the job IDs the failures name.
func (c *hostChaos) namedJobs() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for _, e := range c.errs {
		for _, w := range jobWord.FindAllString(e, -1) {
			out[w] = true
		}
	}
	return out
}

func (d *chaosDaemon) logTailLocked() string {
	data, _ := os.ReadFile(d.logPath)
	if len(data) > 6000 {
		data = data[len(data)-6000:]
	}
	return string(data)
}
