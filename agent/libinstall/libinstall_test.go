package libinstall

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeLib writes a library file (ELF magic, then content) and returns its
// path and the versioned folder name install-lib gives it under version.
func fakeLib(t *testing.T, version, content string) (path, folder string) {
	t.Helper()
	data := []byte("\x7fELF" + content)
	path = filepath.Join(t.TempDir(), File)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return path, version + "-" + hex.EncodeToString(sum[:])[:12]
}

// installState is what install-lib leaves in a folder.
type installState struct {
	link    string   // the symlink's target
	folders []string // versioned folders, sorted
	others  []string // every other entry, sorted
}

func readState(t *testing.T, dir string) installState {
	t.Helper()
	var s installState
	s.link, _ = os.Readlink(filepath.Join(dir, File))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch {
		case e.Name() == File:
		case e.IsDir() && versionedDir.MatchString(e.Name()):
			s.folders = append(s.folders, e.Name())
			sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if len(sub) != 1 || sub[0].Name() != File {
				t.Errorf("folder %s holds %v, want only %s", e.Name(), sub, File)
			}
		default:
			s.others = append(s.others, e.Name())
		}
	}
	return s
}

func mustInstall(t *testing.T, o Options) string {
	t.Helper()
	msg, err := Install(o)
	if err != nil {
		t.Fatalf("install %s: %v", o.From, err)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message is more than one line: %q", msg)
	}
	return msg
}

func TestInstallLibLifecycle(t *testing.T) {
	to := filepath.Join(t.TempDir(), "lib")
	if err := os.MkdirAll(filepath.Join(to, "notes"), 0o755); err != nil { // not install-lib's: left alone
		t.Fatal(err)
	}
	libA, a := fakeLib(t, "v1.0.0", "A")
	libB, b := fakeLib(t, "v1.1.0", "B")
	libC, c := fakeLib(t, "v1.2.0", "C")
	libD, d := fakeLib(t, "v1.3.0", "D")
	target := func(folder string) string { return filepath.Join(folder, File) }
	sorted := func(s ...string) []string { slices.Sort(s); return s }

	// Fresh install.
	msg := mustInstall(t, Options{From: libA, To: to, Keep: 3, Version: "v1.0.0"})
	if !strings.HasPrefix(msg, "installed "+File+" "+a) {
		t.Errorf("fresh install said %q", msg)
	}
	s := readState(t, to)
	if s.link != target(a) || !slices.Equal(s.folders, []string{a}) || !slices.Equal(s.others, []string{"notes"}) {
		t.Fatalf("after a fresh install: %+v, want the symlink at %s and folder %s", s, target(a), a)
	}
	got, err := os.ReadFile(filepath.Join(to, File))
	if err != nil || string(got) != "\x7fELFA" {
		t.Errorf("reading through the symlink: %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(to, a, File)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed file: %v, %v; want mode 0755", fi, err)
	}

	// Reinstalling the same content rewrites nothing.
	fileBefore, _ := os.Stat(filepath.Join(to, a, File))
	linkBefore, _ := os.Lstat(filepath.Join(to, File))
	msg = mustInstall(t, Options{From: libA, To: to, Keep: 3, Version: "v1.0.0"})
	if !strings.Contains(msg, "already installed, nothing changed") {
		t.Errorf("reinstall said %q", msg)
	}
	fileAfter, _ := os.Stat(filepath.Join(to, a, File))
	linkAfter, _ := os.Lstat(filepath.Join(to, File))
	if !os.SameFile(fileBefore, fileAfter) || !fileBefore.ModTime().Equal(fileAfter.ModTime()) || !os.SameFile(linkBefore, linkAfter) {
		t.Errorf("reinstalling the same library rewrote the file or the symlink")
	}

	// Upgrade: the symlink moves, the old version stays.
	msg = mustInstall(t, Options{From: libB, To: to, Keep: 3, Version: "v1.1.0"})
	if !strings.HasPrefix(msg, "installed "+File+" "+b) || !strings.Contains(msg, "(was "+target(a)+")") {
		t.Errorf("upgrade said %q", msg)
	}
	if s := readState(t, to); s.link != target(b) || !slices.Equal(s.folders, sorted(a, b)) {
		t.Errorf("after the upgrade: %+v, want the symlink at %s and folders %s, %s", s, target(b), a, b)
	}

	// Two more versions: the oldest goes, three stay.
	mustInstall(t, Options{From: libC, To: to, Keep: 3, Version: "v1.2.0"})
	msg = mustInstall(t, Options{From: libD, To: to, Keep: 3, Version: "v1.3.0"})
	if !strings.HasSuffix(msg, "; removed older "+a) {
		t.Errorf("the install that prunes said %q", msg)
	}
	if s := readState(t, to); s.link != target(d) || !slices.Equal(s.folders, sorted(b, c, d)) || !slices.Equal(s.others, []string{"notes"}) {
		t.Errorf("after pruning: %+v, want folders %s, %s, %s and notes untouched", s, b, c, d)
	}

	// Back to a kept version: switched without a copy, and it counts as
	// the newest, so the next install prunes another.
	msg = mustInstall(t, Options{From: libB, To: to, Keep: 3, Version: "v1.1.0"})
	if !strings.HasPrefix(msg, "switched "+File+" to the installed "+b) {
		t.Errorf("going back to a kept version said %q", msg)
	}
	msg = mustInstall(t, Options{From: libA, To: to, Keep: 3, Version: "v1.0.0"})
	if s := readState(t, to); s.link != target(a) || !slices.Equal(s.folders, sorted(a, b, d)) {
		t.Errorf("after reinstalling the oldest: %+v (%q), want folders %s, %s, %s", s, msg, a, b, d)
	}

	// keep 1: only what the symlink names is left.
	mustInstall(t, Options{From: libC, To: to, Keep: 1, Version: "v1.2.0"})
	if s := readState(t, to); s.link != target(c) || !slices.Equal(s.folders, []string{c}) {
		t.Errorf("with --keep 1: %+v, want only %s", s, c)
	}

	// A damaged versioned file is written again.
	if err := os.WriteFile(filepath.Join(to, c, File), []byte("garbage"), 0o755); err != nil {
		t.Fatal(err)
	}
	msg = mustInstall(t, Options{From: libC, To: to, Keep: 3, Version: "v1.2.0"})
	if !strings.HasPrefix(msg, "repaired ") {
		t.Errorf("reinstall over a damaged file said %q", msg)
	}
	if got, _ := os.ReadFile(filepath.Join(to, File)); string(got) != "\x7fELFC" {
		t.Errorf("after the repair the library reads %q", got)
	}
	if s := readState(t, to); !slices.Equal(s.others, []string{"notes"}) {
		t.Errorf("temporary files left behind: %v", s.others)
	}
}

// TestInstallLibSwapIsAtomic reads the library through the symlink in a
// loop while versions are installed and switched: no read may fail or see
// a partial file.
func TestInstallLibSwapIsAtomic(t *testing.T) {
	to := t.TempDir()
	var libs []string
	valid := map[string]bool{}
	for i := range 4 {
		content := strings.Repeat(fmt.Sprintf("version %d;", i), 4096)
		lib, _ := fakeLib(t, "v1", content)
		libs = append(libs, lib)
		valid["\x7fELF"+content] = true
	}
	mustInstall(t, Options{From: libs[0], To: to, Keep: 5, Version: "v1"})
	stop := make(chan struct{})
	var (
		wg          sync.WaitGroup
		reads       int
		failures    []string
		firstReadOK = make(chan struct{})
	)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			data, err := os.ReadFile(filepath.Join(to, File))
			switch {
			case err != nil:
				failures = append(failures, err.Error())
			case !valid[string(data)]:
				failures = append(failures, fmt.Sprintf("read %d bytes that are no installed version", len(data)))
			}
			if reads++; reads == 1 {
				close(firstReadOK)
			}
		}
	})
	<-firstReadOK
	for i := range 200 {
		mustInstall(t, Options{From: libs[i%len(libs)], To: to, Keep: 5, Version: "v1"})
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d reads failed during the installs, first: %s", len(failures), reads, failures[0])
	}
}

func TestFolderVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":              "v1.2.3",
		"v1.2.3-4-gabc-dirty": "v1.2.3-4-gabc-dirty",
		"v1.0.0+meta":         "v1.0.0+meta",
		"":                    "devel",
		"a/b c":               "a_b_c",
	} {
		if got := folderVersion(in); got != want {
			t.Errorf("folderVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
