package safefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// nobody is the uid of a second local user (tests that chown need root).
const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it gives a folder to another user (uid 65534) with chown")
	}
}

func TestCheckStateDirRefusesWhatOthersCouldChange(t *testing.T) {
	base := t.TempDir()
	ok := filepath.Join(base, "ok")
	if err := PrepareStateDir(ok, "state folder"); err != nil {
		t.Fatalf("a fresh owner-only folder: %v", err)
	}
	if fi, err := os.Stat(ok); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("PrepareStateDir made %v (%v), want mode 0700", fi.Mode(), err)
	}
	// Traversable, not writable (what --socket-mode 0666 makes it): fine.
	if err := os.Chmod(ok, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateDir(ok, "state folder"); err != nil {
		t.Errorf("a 0711 folder: %v", err)
	}

	open := filepath.Join(base, "open")
	mustMkdir(t, open, 0o777)
	err := CheckStateDir(open, "state folder")
	wantErr(t, err, ErrUnsafe, "state folder "+open, "writable by group or others", "mode 0777", "chmod 700 "+open)

	// A /tmp-like parent (sticky, writable by all) is fine; one without the
	// sticky bit is not.
	sticky := filepath.Join(base, "sticky")
	mustMkdir(t, sticky, 0o777|fs.ModeSticky)
	if err := PrepareStateDir(filepath.Join(sticky, "s"), "state folder"); err != nil {
		t.Errorf("a state folder in a sticky folder: %v", err)
	}
	loose := filepath.Join(base, "loose")
	mustMkdir(t, loose, 0o777)
	err = PrepareStateDir(filepath.Join(loose, "s"), "state folder")
	wantErr(t, err, ErrUnsafe, "its parent "+loose, "mode 0777", "without the sticky bit", "chmod go-w "+loose)

	// A link to an unsafe folder is judged by the folder.
	link := filepath.Join(base, "link")
	if err := os.Symlink(open, link); err != nil {
		t.Fatal(err)
	}
	wantErr(t, CheckStateDir(link, "state folder"), ErrUnsafe, open, "mode 0777")
}

func TestCheckStateDirRefusesAnotherUsersFolder(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	mustMkdir(t, theirs, 0o700)
	if err := os.Chown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	wantErr(t, CheckStateDir(theirs, "state folder"), ErrUnsafe, "state folder "+theirs, "belongs to uid 65534", "mode 0700", "chown 0 "+theirs)
	// Their folder as a parent: they could swap ours for theirs.
	mine := filepath.Join(theirs, "mine")
	mustMkdir(t, mine, 0o700)
	wantErr(t, CheckStateDir(mine, "state folder"), ErrUnsafe, "its parent "+theirs, "belongs to another user")
	// And under a state folder: a folder of theirs is refused by OpenDir
	// and MkdirAll.
	root := t.TempDir()
	sub := filepath.Join(root, "jobs")
	mustMkdir(t, sub, 0o700)
	if err := os.Chown(sub, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(root, "jobs"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("OpenDir of another user's folder: %v, want ErrUnsafe", err)
	}
	wantErr(t, MkdirAll(root, "jobs/job-1", 0o700), ErrUnsafe, sub, "uid 65534")
	if _, err := os.Lstat(filepath.Join(sub, "job-1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("MkdirAll created a folder in another user's folder (%v)", err)
	}
}

// openers are the two ways of opening beneath a root: openat2, and the
// walk used where the kernel has none.
var openers = map[string]func(rfd int, name string, flag int, perm uint32) (int, error){
	"openat2": openBeneath,
	"walk":    walk,
}

func TestOpenNeverFollowsLinks(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(root, "jobs"), 0o700)
	mustMkdir(t, filepath.Join(root, "jobs", "job-1"), 0o700)
	if err := os.WriteFile(filepath.Join(root, "jobs", "job-1", "stdout.log"), []byte("out\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file replaced by a link, a folder replaced by a link.
	if err := os.Symlink(secret, filepath.Join(root, "jobs", "job-1", "stderr.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "jobs", "job-2")); err != nil {
		t.Fatal(err)
	}
	rfd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	for how, open := range openers {
		for _, name := range []string{"jobs/job-1/stderr.log", "jobs/job-2/secret", "jobs/../../" + filepath.Base(outside) + "/secret"} {
			for _, flag := range []int{unix.O_RDONLY, unix.O_WRONLY | unix.O_APPEND | unix.O_CREAT} {
				fd, err := open(rfd, name, flag, 0o600)
				if err == nil {
					unix.Close(fd)
					t.Errorf("%s: %s (flags %#x) opened through a link", how, name, flag)
				}
			}
		}
		fd, err := open(rfd, "jobs/job-1/stdout.log", unix.O_RDONLY, 0)
		if err != nil {
			t.Errorf("%s: a plain file: %v", how, err)
		} else {
			unix.Close(fd)
		}
	}
	if got, _ := os.ReadFile(secret); string(got) != "root's secret\n" {
		t.Errorf("the link's target changed to %q", got)
	}
	// The errors name the link and what it points to.
	_, err = ReadFile(root, "jobs/job-1/stderr.log")
	wantErr(t, err, ErrLink, filepath.Join(root, "jobs", "job-1", "stderr.log")+" is a symbolic link (to "+secret+")", "remove the link")
	_, err = OpenFile(root, "jobs/job-2/stdout.log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	wantErr(t, err, ErrLink, filepath.Join(root, "jobs", "job-2")+" is a symbolic link")
	if _, err := os.Stat(filepath.Join(outside, "stdout.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was created through the link (%v)", err)
	}
	if _, err := OpenFile(root, "../x", os.O_RDONLY, 0); err == nil || !strings.Contains(err.Error(), "must be a path inside") {
		t.Errorf("../x: %v, want a refusal", err)
	}
	// A missing file is fs.ErrNotExist, as with os.Open.
	if _, err := ReadFile(root, "jobs/job-1/exit.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestWritesStayInTheStateFolder(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := MkdirAll(root, "jobs/job-1", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(root, "jobs/job-1/exit.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(root, "jobs/job-1/exit.json"); err != nil || string(got) != "{}" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "jobs", "job-2")); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"WriteFile":   WriteFile(root, "jobs/job-2/exit.json", []byte("x"), 0o600),
		"ReplaceFile": ReplaceFile(root, "jobs/job-2/record.json", []byte("x"), 0o600),
		"MkdirAll":    MkdirAll(root, "jobs/job-2/shm", 0o700),
		"Remove":      Remove(root, "jobs/job-2/exit.json"),
	} {
		if !errors.Is(err, ErrLink) {
			t.Errorf("%s through a linked folder: %v, want ErrLink", what, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the link's target holds %d entries, want none", len(ents))
	}
	// Remove takes a link away, never what it points to.
	target := filepath.Join(outside, "keep")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "jobs", "job-1", "stdout.log")); err != nil {
		t.Fatal(err)
	}
	if err := Remove(root, "jobs/job-1/stdout.log"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("Remove removed the link's target: %v", err)
	}
	// A group-writable folder on the way is refused.
	mustMkdir(t, filepath.Join(root, "open"), 0o770)
	if err := WriteFile(root, "open/f", nil, 0o600); !errors.Is(err, ErrUnsafe) {
		t.Errorf("a write into a group-writable folder: %v, want ErrUnsafe", err)
	}
}

func mustMkdir(t *testing.T, dir string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, is error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("no error, want one wrapping %v saying %q", is, parts)
		return
	}
	if !errors.Is(err, is) {
		t.Errorf("error %v does not wrap %v", err, is)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}
