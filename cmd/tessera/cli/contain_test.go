package cli

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/contain"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// nobodyUID is the second local user the tests run processes as.
const nobodyUID = 65534

// finalJob polls `tessera ps` until job id is final and returns it.
func finalJob(t *testing.T, host []string, id string) api.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, j := range psJobs(t, host) {
			if j.ID == id && j.State.Final() {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not end within 60s", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// jobOf returns job id as `tessera ps` shows it.
func jobOf(t *testing.T, host []string, id string) api.Job {
	t.Helper()
	for _, j := range psJobs(t, host) {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("no job %s", id)
	return api.Job{}
}

// procState is the state letter of process pid ("" when gone).
func procState(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 >= len(data) {
		return ""
	}
	return string(data[i+2])
}

// Issue 34 (3): a job that stops its own supervisor (kill -STOP $PPID) is
// still stopped by `tessera stop`: once the supervisor has not answered
// within the stop grace the daemon kills the job's processes and the
// supervisor, records why, and only then gives the GPU to the next job.
func TestStopEndsAJobThatStoppedItsSupervisor(t *testing.T) {
	d := startUp(t, "1xH200", "--stop-grace", "1s")
	run := append([]string{"run", "-d"}, d.host...)
	code, out, errs := tessera(append(run, "--", "sh", "-c", `kill -STOP $PPID; echo $$; exec sleep 600`)...)
	if code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	id := strings.TrimSpace(out)
	// The job's main process prints its pid, then becomes sleep.
	var pid int
	deadline := time.Now().Add(30 * time.Second)
	for pid == 0 {
		if data, _ := os.ReadFile(filepath.Join(d.dir, "jobs", id, supervisor.StdoutFile)); len(data) > 0 && data[len(data)-1] == '\n' {
			if pid, _ = strconv.Atoi(strings.TrimSpace(string(data))); pid == 0 {
				t.Fatalf("job output %q, want its pid", data)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not print its pid within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start, _, _, err := supervisor.ProcStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	rec := jobOf(t, d.host, id)
	for deadline := time.Now().Add(30 * time.Second); procState(rec.SupervisorPID) != "T"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job's supervisor %d is in state %q, want T (stopped by the job)", rec.SupervisorPID, procState(rec.SupervisorPID))
		}
	}
	// A second job needs the whole GPU: it waits for the first one's.
	code, out, errs = tessera(append(run, "--", "true")...)
	if code != 0 {
		t.Fatalf("run the second job: %d %s", code, errs)
	}
	next := strings.TrimSpace(out)
	if s := jobOf(t, d.host, next).State; s != api.Queued {
		t.Fatalf("second whole-GPU job is %s while the first runs, want queued", s)
	}
	if code, out, errs := tessera(append([]string{"stop", id}, d.host...)...); code != 0 {
		t.Fatalf("stop: %d %s %s", code, out, errs)
	}
	got := finalJob(t, d.host, id)
	// Processes do not come back: what is dead now was dead when the job
	// was recorded as ended.
	if alive, _ := supervisor.Alive(rec.SupervisorPID, rec.SupervisorStart); alive {
		t.Errorf("supervisor %d still runs after the job was recorded as %s", rec.SupervisorPID, got.State)
	}
	if alive, _ := supervisor.Alive(pid, start); alive {
		t.Errorf("the job's process %d still runs after it was recorded as %s", pid, got.State)
	}
	want := "the supervisor did not answer within the stop grace (1s); the daemon killed the job's processes"
	if got.State != api.Stopped || got.Reason != want || got.ExitCode == nil || *got.ExitCode != 137 {
		t.Errorf("job = %s %q exit %v, want %s %q exit 137", got.State, got.Reason, got.ExitCode, api.Stopped, want)
	}
	if j := finalJob(t, d.host, next); j.State != api.Succeeded {
		t.Errorf("the second job = %s %q, want succeeded once the GPU was free", j.State, j.Reason)
	}
	// Recorded once: the record stays as it is.
	if again := jobOf(t, d.host, id); again.State != got.State || again.Reason != got.Reason {
		t.Errorf("job record changed from %s %q to %s %q", got.State, got.Reason, again.State, again.Reason)
	}
}

// copyForOthers copies the test binary (which stands in for tessera) where
// another user can run it and returns its path.
func copyForOthers(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tessera")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// asNobody runs the tessera stand-in bin as uid and gid 65534 and returns
// its exit code and output.
func asNobody(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{cliSuperviseEnv + "=1", "PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("run %s as uid %d: %v", bin, nobodyUID, err)
	}
	return 0, string(out)
}

// needRootAndCgroup skips unless this test runs as root where cgroup v2
// is writable, and returns the hierarchy's mount point.
func needRootAndCgroup(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: running a job as another user (uid 65534) needs a daemon running as root; run the tests as root to cover it")
	}
	h, why := contain.Detect(t.TempDir())
	if h.Base == "" {
		t.Skipf("skipping: no writable cgroup v2 hierarchy here (%s)", why)
	}
	_ = os.Remove(h.Base)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4]
			}
		}
	}
	t.Skip("skipping: no cgroup v2 mount in /proc/self/mountinfo")
	return ""
}

// openDaemon starts `tessera up` (root) with its socket open to every
// local user (--socket-mode 0666; the state folder made traversable).
func openDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, dir: t.TempDir(), spec: "1xH200"}
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	d.host = []string{"--state-dir", d.dir, "--socket", filepath.Join(d.dir, "api.sock")}
	d.extra = append([]string{"--socket-mode", "0666", "--contain", "cgroup"}, extra...)
	d.start()
	// Runs after d.stop: the jobs have ended, so the daemon leaves no
	// folder under the runtime root (as it would leave none in /run/tessera).
	t.Cleanup(func() {
		if t.Failed() {
			return // a failed test may leave a job running, and its folder
		}
		root := filepath.Dir(d.runtime)
		des, err := os.ReadDir(root)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Error(err)
		}
		for _, de := range des {
			t.Errorf("after the daemon stopped, %s holds %s, want nothing", root, de.Name())
		}
	})
	t.Cleanup(d.stop)
	return d
}

// escapeScript tries to leave the job's cgroup (into its parent, the
// daemons' folder and the root: $CGMNT is the hierarchy's mount point),
// then starts a process that leaves its session and clears its
// environment, waits until it has, and ends.
const escapeScript = `id -u
cg=$(sed -n 's/^0:://p' /proc/self/cgroup)
for p in "$CGMNT$(dirname "$cg")" "$CGMNT$(dirname "$(dirname "$cg")")" "$CGMNT"; do
	if echo $$ > "$p/cgroup.procs"; then echo "moved to $p"; else echo "refused $p"; fi
done
if : > "$TESSERA_SHM_DIR/probe"; then echo "shm $TESSERA_SHM_DIR"; else echo "shm not writable"; fi
if kill -0 $PPID 2>/dev/null; then echo "may signal its supervisor"; else echo "cannot signal its supervisor"; fi
if ls "$STATE" >/dev/null 2>&1; then echo "may read the state folder"; else echo "cannot read the state folder"; fi
setsid env -i /bin/sleep 600 &
echo "sleeper $!"
while grep -q TESSERA_JOB_MARK /proc/$!/environ 2>/dev/null; do sleep 0.01; done
exit 0`

// checkContained checks a job that ran escapeScript: it ran as uid, each
// cgroup.procs write was refused, it could write its accounting folder
// (where its interception library counts memory), which is gone after
// it, it could neither signal its supervisor nor read the state folder,
// and its sleeper was gone when it was recorded as ended.
func checkContained(t *testing.T, host []string, id string, uid int) {
	t.Helper()
	got := finalJob(t, host, id)
	out, err := os.ReadFile(filepath.Join(host[1], "jobs", id, supervisor.StdoutFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 8 || lines[0] != strconv.Itoa(uid) {
		t.Fatalf("job output %q, want its uid %d first", out, uid)
	}
	sleeper, err := strconv.Atoi(strings.TrimPrefix(lines[len(lines)-1], "sleeper "))
	if err != nil {
		t.Fatalf("job output %q: no sleeper pid", out)
	}
	if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(sleeper) + "/cmdline"); err == nil && string(cmd) == "/bin/sleep\x00600\x00" {
		_ = syscall.Kill(sleeper, syscall.SIGKILL)
		t.Errorf("the job's setsid env -i sleeper %d outlived the job, recorded as %s", sleeper, got.State)
	}
	for _, l := range lines[1:4] {
		if !strings.HasPrefix(l, "refused ") {
			t.Errorf("the job left its cgroup: %q (output %q)", l, out)
		}
	}
	shm, ok := strings.CutPrefix(lines[4], "shm ")
	if !ok || !filepath.IsAbs(shm) || strings.HasPrefix(shm, host[1]) {
		t.Errorf("the job's accounting folder: %q, want one it may write outside the state folder %s", lines[4], host[1])
	} else if _, err := os.Lstat(shm); err == nil {
		t.Errorf("the job's accounting folder %s is left after the job", shm)
	}
	if lines[5] != "cannot signal its supervisor" || lines[6] != "cannot read the state folder" {
		t.Errorf("the job reached what is not its own: %q", lines[5:7])
	}
	errs, _ := os.ReadFile(filepath.Join(host[1], "jobs", id, supervisor.StderrFile))
	if !strings.Contains(string(errs), "Permission denied") {
		t.Errorf("job stderr %q, want the cgroup.procs writes refused with Permission denied", errs)
	}
	if got.State != api.Succeeded {
		t.Errorf("job = %s %q, want succeeded (its main process exits 0 and its sleeper is ended with it)", got.State, got.Reason)
	}
}

// Issue 34 (5): a root daemon runs a job another user submits over the
// socket as that user, who cannot write any cgroup.procs above the job's:
// the job cannot move itself out of its cgroup, and a child that clears
// its environment and leaves its session still ends with the job.
func TestJobOfAnotherUserCannotLeaveItsCgroup(t *testing.T) {
	mnt := needRootAndCgroup(t)
	bin := copyForOthers(t)
	d := openDaemon(t)
	code, out := asNobody(t, bin, append(append([]string{"run", "-d"}, d.host...), "-e", "CGMNT="+mnt, "-e", "STATE="+d.host[1], "--", "/bin/sh", "-c", escapeScript)...)
	if code != 0 {
		t.Fatalf("run as uid %d: %d %s", nobodyUID, code, out)
	}
	id := strings.TrimSpace(out)
	if j := jobOf(t, d.host, id); j.OwnerUID == nil || *j.OwnerUID != nobodyUID {
		t.Fatalf("job owner %v, want uid %d", j.OwnerUID, nobodyUID)
	}
	checkContained(t, d.host, id, nobodyUID)
}

// Issue 34 (5): with --job-user, a root daemon runs the jobs root submits
// as that user; the same escape fails.
func TestJobUserRunsRootsJobs(t *testing.T) {
	mnt := needRootAndCgroup(t)
	if _, err := supervisor.LookupUser("nobody"); err != nil {
		t.Skipf("skipping: %v", err)
	}
	d := openDaemon(t, "--job-user", "nobody")
	// Jobs run in the submitter's folder: one the job's user may enter.
	open := t.TempDir()
	if err := os.Chmod(filepath.Dir(open), 0o711); err != nil {
		t.Fatal(err)
	}
	t.Chdir(open)
	code, out, errs := tessera(append(append([]string{"run", "-d"}, d.host...), "-e", "CGMNT="+mnt, "-e", "STATE="+d.host[1], "--", "/bin/sh", "-c", escapeScript)...)
	if code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	checkContained(t, d.host, strings.TrimSpace(out), nobodyUID)

	// A working folder the job's user may not enter: the job fails
	// naming the folder and the user.
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(private)
	code, out, errs = tessera(append(append([]string{"run", "-d"}, d.host...), "--", "/bin/true")...)
	if code != 0 {
		t.Fatalf("run in %s: %d %s", private, code, errs)
	}
	got := finalJob(t, d.host, strings.TrimSpace(out))
	if got.State != api.Failed || !strings.Contains(got.Reason, "working folder "+private+" is not accessible to nobody (uid 65534)") {
		t.Errorf("job in a folder its user cannot enter = %s %q, want failed naming the folder and the user", got.State, got.Reason)
	}
}

// --job-user is checked at startup: an unknown user is a usage error, and
// a daemon not running as root refuses to run jobs as another user.
func TestUpRejectsBadJobUser(t *testing.T) {
	code, _, errs := tessera("up", "--simulate", "1xH200", "--state-dir", t.TempDir(), "--job-user", "no-such-user-tessera")
	if code != exitUsage || !strings.Contains(errs, `--job-user: no user "no-such-user-tessera"`) {
		t.Errorf("unknown user: exit %d, stderr %q; want %d naming the flag and the value", code, errs, exitUsage)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping the non-root daemon case: starting tessera up as uid 65534 needs root")
	}
	bin := copyForOthers(t)
	state := filepath.Join(filepath.Dir(bin), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, nobodyUID, nobodyUID); err != nil {
		t.Fatal(err)
	}
	code, out := asNobody(t, bin, "up", "--simulate", "1xH200", "--state-dir", state, "--job-user", "root")
	if code != exitUsage || !strings.Contains(out, `--job-user: must be this daemon's own user (uid 65534) when tessera up does not run as root, got "root"`) {
		t.Errorf("non-root daemon with --job-user root: exit %d, output %q; want %d and why", code, out, exitUsage)
	}
}
