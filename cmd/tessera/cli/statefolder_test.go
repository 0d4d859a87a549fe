package cli

import (
	"bytes"
	"context"
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
)

// tesseraBinary runs this test binary as the tessera binary (TestMain)
// and returns its exit code and stderr.
func tesseraBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	// Bounds the wait for a refusal: a daemon that starts instead is
	// killed (and the test fails on its exit status).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliSuperviseEnv+"=1")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("run tessera %v: %v", args, err)
	return 0, ""
}

// A state folder another user could change is refused before anything
// is written in it: with the default socket mode, a 0777 or foreign
// state folder let that user point the root daemon's writes anywhere.
func TestUpRefusesAStateFolderOthersCouldChange(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	mkdirMode(t, open, 0o777)
	loose := filepath.Join(base, "loose")
	mkdirMode(t, loose, 0o777)
	cases := []struct {
		name, dir string
		want      []string
	}{
		{"writable by others", open, []string{"--state-dir: state folder " + open, "writable by group or others", "mode 0777", "run chmod 700 " + open}},
		{"under a parent anyone may write to", filepath.Join(loose, "state"), []string{"its parent " + loose, "mode 0777", "without the sticky bit", "chmod go-w " + loose}},
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		mkdirMode(t, theirs, 0o700)
		if err := os.Chown(theirs, nobodyUID, nobodyUID); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name, dir string
			want      []string
		}{"owned by another user", theirs, []string{"state folder " + theirs, "belongs to uid 65534", "mode 0700", "not to this process's user uid 0", "chown 0 " + theirs}})
	} else {
		t.Log("not root: the case of a state folder owned by uid 65534 needs root to chown it")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, extra := range [][]string{nil, {"--recover"}} {
				args := append([]string{"up", "--simulate", "1xH200", "--state-dir", tc.dir}, extra...)
				code, stderr := tesseraBinary(t, args...)
				if code == 0 {
					t.Fatalf("tessera %v: exit 0, want a refusal", args)
				}
				for _, w := range tc.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("tessera %v: stderr does not say %q:\n%s", args, w, stderr)
					}
				}
				if ents, err := os.ReadDir(tc.dir); err == nil && len(ents) > 0 {
					t.Errorf("tessera %v wrote %d entries (%s...) into the refused folder", args, len(ents), ents[0].Name())
				}
			}
		})
	}
	// The supervisor refuses a job folder in such a state folder too.
	job := filepath.Join(open, "jobs", "job-1")
	if err := os.MkdirAll(job, 0o700); err != nil {
		t.Fatal(err)
	}
	code, stderr := tesseraBinary(t, "supervise", job)
	if code == 0 || !strings.Contains(stderr, "its parent "+open) || !strings.Contains(stderr, "mode 0777") {
		t.Errorf("supervise in a 0777 state folder: exit %d, stderr %q; want a refusal naming %s", code, stderr, open)
	}
}

// A job folder or log replaced by a link: the daemon neither writes
// through it nor streams what it points to, and says why.
func TestDaemonFollowsNoLinkInTheStateFolder(t *testing.T) {
	d := startUp(t, "1xH200")
	host := d.host
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		code, out, errs := tessera(append(append([]string{"run", "--detach"}, host...), args...)...)
		if code != 0 {
			t.Fatalf("run --detach %v: %d %s", args, code, errs)
		}
		return strings.TrimSpace(out)
	}
	jobDir := func(id string) string { return filepath.Join(d.dir, "jobs", id) }

	// Streaming: a finished job's stdout.log replaced by a link.
	first := run("--", "sh", "-c", "echo hi")
	if j := finalJob(t, host, first); j.State != api.Succeeded {
		t.Fatalf("%s: %s (%s)", first, j.State, j.Reason)
	}
	stdout := filepath.Join(jobDir(first), "stdout.log")
	if err := os.Remove(stdout); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, stdout); err != nil {
		t.Fatal(err)
	}
	code, out, errs := tessera(append([]string{"logs", first}, host...)...)
	if code == 0 || strings.Contains(out, "secret") || !strings.Contains(errs, stdout+" is a symbolic link (to "+secret+")") {
		t.Errorf("logs of a job whose stdout.log is a link: exit %d, out %q, stderr %q; want a refusal naming the link", code, out, errs)
	}

	// Writing: queued jobs (the GPU is taken) whose folder, or whose
	// stdout.log, is replaced by a link before they start.
	gate := filepath.Join(t.TempDir(), "gate")
	holder := run("--", "sh", "-c", "while [ ! -e "+gate+" ]; do sleep 0.02; done")
	linkedDir := run("--", "sh", "-c", "echo written")
	linkedLog := run("--", "sh", "-c", "echo written")
	for _, id := range []string{linkedDir, linkedLog} {
		waitForFile(t, filepath.Join(jobDir(id), "record.json"))
	}
	target := filepath.Join(outside, "dir")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(jobDir(linkedDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, jobDir(linkedDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(jobDir(linkedLog), "stdout.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if j := finalJob(t, host, holder); j.State != api.Succeeded {
		t.Fatalf("%s: %s (%s)", holder, j.State, j.Reason)
	}
	j := finalJob(t, host, linkedDir)
	if j.State == api.Succeeded || !strings.Contains(j.Reason, jobDir(linkedDir)+" is a symbolic link (to "+target+")") {
		t.Errorf("%s, whose folder is a link: %s (%q); want it refused, saying so", linkedDir, j.State, j.Reason)
	}
	j = finalJob(t, host, linkedLog)
	if j.State == api.Succeeded || !strings.Contains(j.Reason, "stdout.log is a symbolic link (to "+secret+")") {
		t.Errorf("%s, whose stdout.log is a link: %s (%q); want it not run, saying why", linkedLog, j.State, j.Reason)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("the daemon wrote %d entries (%s...) through a linked job folder", len(ents), ents[0].Name())
	}
	if got, _ := os.ReadFile(secret); string(got) != "root's secret\n" {
		t.Errorf("the file a linked stdout.log points to now holds %q", got)
	}
}

// A job that fills the disk of its folder ends saying so, and leaves no
// temporary file behind. The job folders are a small tmpfs (root only).
func TestJobThatFillsTheDiskSaysSo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it mounts a small tmpfs for the job folders")
	}
	d := &daemon{t: t, dir: t.TempDir(), spec: "1xH200"}
	jobs := filepath.Join(d.dir, "jobs")
	mkdirMode(t, jobs, 0o700)
	if err := syscall.Mount("tessera-test", jobs, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(jobs, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", jobs, err)
		}
	})
	d.host = []string{"--state-dir", d.dir, "--socket", filepath.Join(d.dir, "api.sock")}
	d.start()
	t.Cleanup(d.stop)
	code, out, errs := tessera(append(append([]string{"run", "--detach"}, d.host...), "--", "sh", "-c", "cat /dev/zero")...)
	if code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	id := strings.TrimSpace(out)
	j := finalJob(t, d.host, id)
	t.Logf("%s: %s: %s", id, j.State, j.Reason)
	if j.State != api.Failed || !strings.Contains(j.Reason, "no space left on device") {
		t.Errorf("%s filled the disk: %s (%q); want failed, the reason saying no space left on device", id, j.State, j.Reason)
	}
	// The room set aside for the exit status holds it: cat's own status
	// (1, a failed write) is recorded.
	if j.ExitCode == nil || *j.ExitCode != 1 {
		t.Errorf("%s: exit code %v, want cat's 1", id, j.ExitCode)
	}
	err := filepath.WalkDir(jobs, func(path string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A socket path longer than a unix socket takes is a usage error that
// says so, before anything starts.
func TestUpRefusesASocketPathTooLong(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, strings.Repeat("s", 120-len(dir))+".sock")
	code, stderr := tesseraBinary(t, "up", "--simulate", "1xH200", "--state-dir", dir, "--socket", sock)
	for _, w := range []string{"--socket " + sock, "is " + strconv.Itoa(len(sock)) + " bytes", "at most 107 bytes", "108 including the terminating NUL", "shorter path"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, stderr)
		}
	}
	if code != 2 {
		t.Errorf("exit %d, want 2 (a usage error)", code)
	}
	if strings.Contains(stderr, "invalid argument") {
		t.Errorf("stderr still says bind's bare error:\n%s", stderr)
	}
}

func mkdirMode(t *testing.T, dir string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// waitForFile waits until path exists.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Lstat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 30s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
