package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A uid without an entry in the user database runs with the group of the
// same number, no supplementary group and HOME=/.
func TestLookupUIDWithoutEntry(t *testing.T) {
	const uid = 3999999917
	u, err := LookupUID(uid)
	if err != nil {
		t.Fatal(err)
	}
	if u.UID != uid || u.GID != uid || len(u.Groups) != 0 || u.Home != "/" || u.Name != "" || u.String() != "uid 3999999917" {
		t.Errorf("LookupUID(%d) = %+v (%s)", uid, u, u)
	}
	if _, err := LookupUser("no-such-user-tessera"); err == nil || !strings.Contains(err.Error(), `no user "no-such-user-tessera"`) {
		t.Errorf("LookupUser of an unknown name: %v", err)
	}
}

// A supervisor running as root starts the job as the spec's user, with
// that user's HOME unless the job sets one; a working folder the user
// cannot enter fails the start naming the folder and the user.
func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: starting a job as another user (uid 65534) needs root; run the tests as root to cover it")
	}
	nobody := User{UID: 65534, GID: 65534, Name: "nobody", Home: "/nonexistent"}
	open := t.TempDir()
	if err := os.Chmod(filepath.Dir(open), 0o711); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, dir, env string
		code           int
		stdout, reason string
	}{
		{"runs as the user with their HOME", open, "", 0, "65534 65534 /nonexistent nobody\n", "exit status 0"},
		{"the job's HOME wins", open, "HOME=/mine", 0, "65534 65534 /mine nobody\n", "exit status 0"},
		{"a folder the user cannot enter", private, "", 127, "", "cannot start: the job's working folder " + private + " is not accessible to nobody (uid 65534)"},
		{"a missing folder", filepath.Join(open, "gone"), "", 127, "", "cannot start: the job's working folder " + filepath.Join(open, "gone") + " does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"PATH=/usr/bin:/bin"}
			if tt.env != "" {
				env = append(env, tt.env)
			}
			u := nobody
			spec := Spec{Command: []string{"/bin/sh", "-c", `echo "$(id -u) $(id -g) $HOME $USER"`}, Env: env, Dir: tt.dir, User: &u}
			if err := WriteJSON(filepath.Join(dir, SpecFile), spec); err != nil {
				t.Fatal(err)
			}
			if code := Run(dir); code != 0 {
				t.Fatalf("Run = %d", code)
			}
			e, ok, err := ReadExit(dir)
			if err != nil || !ok {
				t.Fatalf("ReadExit = %v, %v", ok, err)
			}
			if e.Code != tt.code || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("exit = %+v, want code %d reason %q", e, tt.code, tt.reason)
			}
			if out, _ := os.ReadFile(filepath.Join(dir, StdoutFile)); string(out) != tt.stdout {
				t.Errorf("stdout %q, want %q", out, tt.stdout)
			}
		})
	}
}
