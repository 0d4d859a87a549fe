package contain

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MarkEnv is the environment variable that carries a job run's mark.
const MarkEnv = "TESSERA_JOB_MARK"

// Job says where one run of a job's processes can be found. It is stored
// in the job's spec, so a daemon started later finds them too.
type Job struct {
	// Mark is the value of MarkEnv in every process of the run.
	Mark string `json:"mark"`
	// Cgroup is the run's cgroup v2 folder (absolute), "" where no
	// writable cgroup v2 hierarchy was found.
	Cgroup string `json:"cgroup,omitempty"`
}

// Host is where a daemon puts its jobs' cgroups.
type Host struct {
	// Base is the cgroup v2 folder under which each job gets a folder of
	// its own; "" means marks only.
	Base string
}

// Detect finds a writable cgroup v2 hierarchy and returns a Host whose
// Base is a folder for this daemon's jobs in it (named after a hash of
// stateDir, so two daemons never share one). When none is usable it
// returns a Host without Base and a reason to log: jobs are then found
// by their mark alone.
func Detect(stateDir string) (Host, string) {
	mnt, err := cgroup2Mount()
	if err != nil {
		return Host{}, err.Error()
	}
	self, err := selfCgroup()
	if err != nil {
		return Host{}, err.Error()
	}
	sum := sha256.Sum256([]byte(stateDir))
	h := hex.EncodeToString(sum[:6])
	// A root-owned hierarchy: a folder of Tessera's own at the top.
	// Otherwise a subtree delegated to this user: beside this process.
	candidates := []string{
		filepath.Join(mnt, "tessera", daemonPrefix+h),
		filepath.Join(mnt, self, delegatedPrefix+h),
	}
	var reasons []string
	for _, c := range candidates {
		if err := os.MkdirAll(c, 0o755); err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		if _, err := os.Stat(filepath.Join(c, "cgroup.procs")); err != nil {
			reasons = append(reasons, fmt.Sprintf("%s is not a cgroup: %v", c, err))
			continue
		}
		return Host{Base: c}, ""
	}
	return Host{}, "no writable cgroup v2 folder (" + strings.Join(reasons, "; ") + ")"
}

// Base folders are named daemonPrefix+HASH under a root-owned hierarchy's
// tessera folder and delegatedPrefix+HASH in a delegated subtree.
const (
	daemonPrefix    = "daemon-"
	delegatedPrefix = "tessera-jobs-"
)

// Release removes the host's Base folder when no job cgroup is left in it
// (the daemon's clean exit): one with jobs still running stays for the
// next daemon, which re-adopts them. Nothing when the host has no Base.
func (h Host) Release() error {
	if h.Base == "" {
		return nil
	}
	_, err := removeIfEmpty(h.Base)
	return err
}

// SweepStale removes the folders of other daemons beside Base that hold
// no cgroup and no process (left by daemons on other state folders that
// ended or were killed), and returns those it removed. The kernel removes
// only an empty cgroup, so a folder whose jobs still run stays; a live
// daemon's empty folder is made again when its next job starts.
func (h Host) SweepStale() ([]string, error) {
	if h.Base == "" {
		return nil, nil
	}
	parent, own := filepath.Split(h.Base)
	prefix := daemonPrefix
	if strings.HasPrefix(own, delegatedPrefix) {
		prefix = delegatedPrefix
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("list daemon cgroups in %s: %w", parent, err)
	}
	var removed []string
	for _, e := range ents {
		if !e.IsDir() || e.Name() == own || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if empty, err := emptyCgroup(p); err != nil || !empty {
			continue
		}
		if ok, err := removeIfEmpty(p); ok && err == nil {
			removed = append(removed, p)
		}
	}
	return removed, nil
}

// emptyCgroup reports whether the cgroup folder dir holds neither a
// process nor a child cgroup.
func emptyCgroup(dir string) (bool, error) {
	pids, err := cgroupProcs(dir)
	if err != nil || len(pids) > 0 {
		return false, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("list cgroup %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.IsDir() {
			return false, nil
		}
	}
	return true, nil
}

// removeIfEmpty removes the cgroup folder dir unless it holds a cgroup or
// a process (the kernel refuses: EBUSY or ENOTEMPTY) or is gone already;
// removed says whether it did.
func removeIfEmpty(dir string) (removed bool, err error) {
	err = syscall.Rmdir(dir)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ENOTEMPTY):
		return false, nil
	default:
		return false, fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
}

// New returns a fresh Job for one run of the job id: a new random mark
// and, when the host has a Base, the cgroup folder the run will use (not
// created yet: the supervisor creates it).
func (h Host) New(id string) (Job, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Job{}, fmt.Errorf("job mark: %w", err)
	}
	j := Job{Mark: id + "." + hex.EncodeToString(b[:])}
	if h.Base != "" {
		j.Cgroup = filepath.Join(h.Base, j.Mark)
	}
	return j, nil
}

// Env is the variable to add to the job's environment.
func (j Job) Env() string { return MarkEnv + "=" + j.Mark }

// Prepare creates the run's cgroup and returns an open descriptor of it
// for SysProcAttr.CgroupFD (the first process is created inside it), or
// nil when the run has no cgroup. The caller closes it after the start.
func (j Job) Prepare() (*os.File, error) {
	if j.Cgroup == "" {
		return nil, nil
	}
	// Another daemon starting may remove this daemon's folder while it
	// holds no job (SweepStale) between MkdirAll's steps: try again then.
	var err error
	for range 3 {
		if err = os.MkdirAll(j.Cgroup, 0o755); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create job cgroup: %w", err)
	}
	f, err := os.Open(j.Cgroup)
	if err != nil {
		return nil, fmt.Errorf("open job cgroup: %w", err)
	}
	return f, nil
}

// Join moves pid into the run's cgroup; it is the fallback where a
// process could not be created inside it.
func (j Job) Join(pid int) error {
	if j.Cgroup == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(j.Cgroup, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("move pid %d into the job cgroup: %w", pid, err)
	}
	return nil
}

// Processes lists the live processes of the run: its cgroup's members
// and every process whose environment carries its mark (zombies are
// gone already and are not listed). A process in the middle of an exec
// shows no environment for a moment; the scan is repeated until no such
// process is left (see scanMark), so a child exec'ing while its parent
// is killed is not missed.
func (j Job) Processes() ([]int, error) {
	seen := map[int]bool{}
	var out []int
	add := func(pid int) {
		if !seen[pid] {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	if j.Cgroup != "" {
		pids, err := cgroupProcs(j.Cgroup)
		if err != nil {
			return nil, err
		}
		for _, p := range pids {
			add(p)
		}
	}
	if j.Mark == "" {
		return out, nil
	}
	marked, err := settledScan(MarkEnv+"="+j.Mark, execSettle)
	if err != nil {
		return nil, err
	}
	for _, p := range marked {
		add(p)
	}
	return out, nil
}

// execSettle bounds how long Processes waits for processes caught in an
// exec to show their environment. An exec takes well under a millisecond;
// a process that keeps showing neither environment nor arguments for this
// long (one exec'd with both empty) is not waited for again.
const execSettle = time.Second

// settledScan scans for kv until no process is caught in an exec, or
// until limit has passed (then the processes still unsettled are left
// out: they cannot be told apart from one exec'd with no environment).
func settledScan(kv string, limit time.Duration) ([]int, error) {
	deadline := time.Now().Add(limit)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		marked, unsettled, err := scanMark(kv)
		if err != nil || len(unsettled) == 0 || time.Now().After(deadline) {
			return marked, err
		}
		time.Sleep(delay)
	}
}

// Signal sends sig to every process of the run (a stop request reaches
// the children that left the job's process group too).
func (j Job) Signal(sig syscall.Signal) error {
	pids, err := j.Processes()
	if err != nil {
		return err
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
	return nil
}

// Kill sends SIGKILL to every process of the run, again and again (a
// process may fork while it is being killed), until none is left or ctx
// ends. It returns nil once none is left; otherwise an error saying how
// many remain.
func (j Job) Kill(ctx context.Context) error {
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if j.Cgroup != "" {
			// Atomic against forks; absent before Linux 5.14.
			err := os.WriteFile(filepath.Join(j.Cgroup, "cgroup.kill"), []byte("1"), 0o644)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("kill job cgroup %s: %w", j.Cgroup, err)
			}
		}
		pids, err := j.Processes()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d process(es) of job run %s still alive after SIGKILL (pids %v): %w", len(pids), j.Mark, pids, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// Remove deletes the run's empty cgroup folder (nothing when it has none
// or it is already gone).
func (j Job) Remove() error {
	if j.Cgroup == "" {
		return nil
	}
	if err := os.Remove(j.Cgroup); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove job cgroup: %w", err)
	}
	return nil
}

func cgroupProcs(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // never created, or removed: nothing in it
	}
	if err != nil {
		return nil, fmt.Errorf("read job cgroup: %w", err)
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("read job cgroup %s: bad pid %q", dir, f)
		}
		out = append(out, pid)
	}
	return out, nil
}

// scanMark returns the processes whose initial environment holds kv,
// and the processes it cannot tell yet (see readEnviron). Processes that
// cannot be read (gone meanwhile, or another user's where the daemon is
// not root) are skipped: a job's processes run as the daemon's user, or,
// under a root daemon, which reads every process, as the job's user.
func scanMark(kv string) (marked, unsettled []int, err error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil, fmt.Errorf("scan processes: %w", err)
	}
	self := os.Getpid()
	needle := []byte(kv)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, settled, ok := readEnviron("/proc/" + e.Name())
		switch {
		case !ok:
		case !settled:
			unsettled = append(unsettled, pid)
		case hasVar(env, needle):
			marked = append(marked, pid)
		}
	}
	return marked, unsettled, nil
}

// readEnviron reads the initial environment of the process at dir
// (/proc/PID). ok is false when it cannot be read; settled is false when
// what was read cannot be trusted: an exec under way (between its new
// memory and its new environment /proc shows none), or one that replaced
// the memory while it was being read (the read is cut short, losing the
// variables at the end). A read is trusted when the environment block's
// bounds, read from /proc/PID/stat before and after, are the same and
// the bytes read fill it.
func readEnviron(dir string) (env []byte, settled, ok bool) {
	for range 3 {
		before, known, err := envBounds(dir)
		if err != nil {
			return nil, false, false
		}
		env, err = os.ReadFile(dir + "/environ")
		if err != nil {
			return nil, false, false
		}
		after, _, err := envBounds(dir)
		if err != nil {
			return nil, false, false
		}
		if !known {
			// A kernel without the bounds in stat (before 3.5): trust a
			// read that found anything.
			return env, len(env) > 0 || !userProcess(dir), true
		}
		if before == after && before[1] != 0 && uint64(len(env)) == before[1]-before[0] {
			return env, true, true
		}
		if before[1] == 0 && !userProcess(dir) {
			return nil, true, true // a zombie or kernel thread: no environment
		}
	}
	return nil, false, true
}

// envBounds returns env_start and env_end from /proc/PID/stat (fields 50
// and 51, shown to whoever may read the environment; 0 while a process
// has no memory or its exec has not set them yet). known is false on a
// kernel that does not show them.
func envBounds(dir string) (b [2]uint64, known bool, err error) {
	f, err := statFields(dir)
	if err != nil {
		return b, false, err
	}
	// Fields are counted from 3 (the state) after the command name.
	if len(f) < 51-2 {
		return b, false, nil
	}
	for i, n := range []int{50, 51} {
		if b[i], err = strconv.ParseUint(f[n-3], 10, 64); err != nil {
			return b, false, fmt.Errorf("%s/stat field %d: %w", dir, n, err)
		}
	}
	return b, true, nil
}

// statFields returns /proc/PID/stat's fields after the command name
// (which may hold spaces and parentheses): the state first.
func statFields(dir string) ([]string, error) {
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("%s/stat: no command name", dir)
	}
	return strings.Fields(string(stat[i+1:])), nil
}

func hasVar(environ, kv []byte) bool {
	for _, v := range bytes.Split(environ, []byte{0}) {
		if bytes.Equal(v, kv) {
			return true
		}
	}
	return false
}

// pfKthread is PF_KTHREAD in /proc/PID/stat's flags (include/linux/sched.h).
const pfKthread = 0x00200000

// userProcess reports whether the process at dir (/proc/PID) is a live
// user-space process: neither a zombie, nor dead, nor a kernel thread.
func userProcess(dir string) bool {
	f, err := statFields(dir)
	// STATE PPID PGRP SESSION TTY TPGID FLAGS ...
	if err != nil || len(f) < 7 || f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfKthread == 0
}

// cgroup2Mount returns the mount point of the cgroup v2 hierarchy.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("find cgroup v2: %w", err)
	}
	defer f.Close()
	return parseCgroup2Mount(f)
}

func parseCgroup2Mount(f io.Reader) (string, error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return unescapeMount(fields[4]), nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("find cgroup v2: %w", err)
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// selfCgroup returns this process's cgroup v2 path ("0::/PATH").
func selfCgroup() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read own cgroup: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("this process has no cgroup v2 path")
}
