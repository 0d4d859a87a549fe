package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A finished run leaves no reserved room and no temporary file behind.
func TestRunLeavesOnlyItsFiles(t *testing.T) {
	dir := t.TempDir()
	if err := WriteJSON(filepath.Join(dir, SpecFile), Spec{Command: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}}); err != nil {
		t.Fatal(err)
	}
	if code := Run(dir); code != 0 {
		t.Fatalf("Run = %d", code)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch e.Name() {
		case SpecFile, ExitFile, StdoutFile, StderrFile:
		default:
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// WhyNoExit gives the daemon the supervisor's last complaint and a full
// disk, for a job that ended without an exit status.
func TestWhyNoExit(t *testing.T) {
	dir := t.TempDir()
	if why := WhyNoExit(dir); why != "" {
		t.Errorf("nothing to say: got %q", why)
	}
	log := "job output\n" + superviseLogPrefix + "first\n" + superviseLogPrefix + "record the exit status (exit status 0): no space left on device\n"
	if err := os.WriteFile(filepath.Join(dir, SupervisorFile), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	if why := WhyNoExit(dir); why != "the supervisor said: record the exit status (exit status 0): no space left on device" {
		t.Errorf("WhyNoExit = %q", why)
	}
	if os.Geteuid() != 0 {
		t.Skip("the full-disk case mounts a tmpfs: needs root")
	}
	full := t.TempDir()
	if err := syscall.Mount("tessera-test", full, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	defer syscall.Unmount(full, syscall.MNT_DETACH)
	f, err := os.Create(filepath.Join(full, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(make([]byte, 1<<20))
	f.Close()
	if err == nil {
		t.Fatal("wrote 1 MiB to a 64 KiB tmpfs")
	}
	if why := WhyNoExit(full); !strings.Contains(why, "is full (no space left on device)") {
		t.Errorf("WhyNoExit on a full disk = %q", why)
	}
}
