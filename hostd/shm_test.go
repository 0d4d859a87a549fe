package hostd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// A root daemon running jobs as another user makes their accounting
// folders in its RuntimeDir and leaves nothing there once it stops with
// no job running: the folder of a job still running at a stop stays for
// the next daemon, which removes it when the job ends, and RuntimeDir
// when it stops in turn. Nothing is made under /run/tessera.
func TestRuntimeDirGoesWithTheDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: running a job as another user needs a daemon running as root; run the tests as root to cover it")
	}
	nobody, err := supervisor.LookupUser("nobody")
	if err != nil {
		t.Skipf("skipping: no user nobody to run jobs as: %v", err)
	}
	dir := t.TempDir()
	asNobody := func(c *Config) { c.JobUser = &nobody }
	runtime := testRuntimeDir(t, dir)
	root := filepath.Dir(runtime)

	d := startDaemon(t, dir, "1xH100", asNobody)
	probe, err := d.Submit(api.SubmitRequest{
		GPU: map[string]string{"compute": "0.1"}, Dir: "/",
		Command: []string{"/bin/sh", "-c", `[ "$(id -u)" = 65534 ] && : > "$TESSERA_SHM_DIR/probe"`},
	})
	if err != nil {
		t.Fatal(err)
	}
	sleeper, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.1"}, Dir: "/", Command: []string{"/bin/sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Wait(t.Context(), probe.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.Succeeded || filepath.Dir(got.ShmDir) != runtime {
		t.Fatalf("probe job: %s %q, accounting folder %q; want succeeded as uid 65534 writing a folder in %s", got.State, got.Reason, got.ShmDir, runtime)
	}
	eventually(t, "the sleeper running", func() bool {
		j, err := d.Job(sleeper.ID)
		return err == nil && j.State == api.Running
	})
	d.shutdown()
	if names := entries(t, runtime); len(names) != 1 || names[0] != sleeper.ID {
		t.Errorf("after a stop with a job running, %s holds %v, want only the running job's folder %s", runtime, names, sleeper.ID)
	}

	d = startDaemon(t, dir, "1xH100", asNobody)
	if _, err := d.Stop(sleeper.ID); err != nil {
		t.Fatal(err)
	}
	if j, err := d.Wait(t.Context(), sleeper.ID); err != nil || j.State != api.Stopped {
		t.Fatalf("sleeper: %v %v, want stopped", j.State, err)
	}
	d.shutdown()
	if names := entries(t, root); len(names) != 0 {
		t.Errorf("after the last stop, %s holds %v, want nothing", root, names)
	}
	if _, err := os.Lstat(defaultRuntimeDir(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the default runtime folder %s: %v, want none made", defaultRuntimeDir(dir), err)
	}
}

// A runtime dir whose parent exists with another mode than the one the
// daemon would set on it (0711) is refused at start, naming both.
func TestRuntimeDirUnderAForeignFolderIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: only a daemon running as root uses a runtime dir")
	}
	dir := t.TempDir()
	cfg := testConfig(t, dir, "1xH100")
	foreign := t.TempDir()
	if err := os.Chmod(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeDir = filepath.Join(foreign, "tessera")
	_, err := New(cfg)
	want := "runtime dir " + cfg.RuntimeDir + ": its parent " + foreign + " (mode drwxr-xr-x) must be missing"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New: %v, want an error containing %q", err, want)
	}
	if fi, err := os.Stat(foreign); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the foreign folder after the refusal: %v %v, want mode 0755 untouched", fi.Mode(), err)
	}
}

// entries lists the names in folder dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
