package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// --socket-mode opens the state folder for traversal only, makes what is
// in it owner-only, and closes it again; the modes follow one another as
// successive `tessera up` runs would set them.
func TestPrepareSocketDirInStateFolder(t *testing.T) {
	state := filepath.Join(openTempDir(t), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(state, "tessera.sock")
	// Left open by something else: a folder (as MPS control daemons make
	// theirs) and a file.
	if err := os.Mkdir(filepath.Join(state, "mps"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode  os.FileMode
		want  os.FileMode
		notes []string
	}{
		{0o666, 0o711, []string{"is now 0711 (was 0700) for --socket-mode 0666: the socket's group and other users may traverse it", "mps is now 0700 (was 0755)", "notes is now 0600 (was 0644)"}},
		{0o666, 0o711, nil},
		{0o660, 0o710, []string{"is now 0710 (was 0711) for --socket-mode 0660: the socket's group may traverse it"}},
		{0o606, 0o701, []string{"is now 0701 (was 0710) for --socket-mode 0606: other users may traverse it"}},
		{0o600, 0o700, []string{"is back to 0700 (was 0701): --socket-mode 0600 lets only the owner connect"}},
		{0o600, 0o700, nil},
		{0o644, 0o700, []string{"connecting needs write, so only its owner can connect"}},
	} {
		notes, err := PrepareSocketDir(state, sock, tc.mode)
		if err != nil {
			t.Fatalf("mode %04o: %v", tc.mode, err)
		}
		if got := perm(t, state); got != tc.want {
			t.Errorf("mode %04o: state folder %04o, want %04o", tc.mode, got, tc.want)
		}
		if len(notes) != len(tc.notes) {
			t.Errorf("mode %04o: notes %q, want %d", tc.mode, notes, len(tc.notes))
			continue
		}
		for i, n := range tc.notes {
			if !strings.Contains(notes[i], n) {
				t.Errorf("mode %04o: note %q lacks %q", tc.mode, notes[i], n)
			}
		}
	}
	if perm(t, filepath.Join(state, "mps")) != 0o700 || perm(t, filepath.Join(state, "notes")) != 0o600 {
		t.Errorf("entries not made owner-only")
	}
}

// A state folder the user opened for reading is theirs to keep with
// 0600; with 0666 it loses read (traverse only), and one writable by
// others is refused.
func TestPrepareSocketDirLeavesOrRefuses(t *testing.T) {
	top := openTempDir(t)
	state := filepath.Join(top, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(state, "s.sock")
	if notes, err := PrepareSocketDir(state, sock, 0o600); err != nil || len(notes) != 0 || perm(t, state) != 0o755 {
		t.Errorf("0600 on a 0755 state folder: %q, %v, %04o; want it left alone", notes, err, perm(t, state))
	}
	if _, err := PrepareSocketDir(state, sock, 0o666); err != nil || perm(t, state) != 0o711 {
		t.Errorf("0666 on a 0755 state folder: %v, %04o; want 0711", err, perm(t, state))
	}
	shared := filepath.Join(top, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := PrepareSocketDir(shared, filepath.Join(shared, "s.sock"), 0o666)
	if err == nil || !strings.Contains(err.Error(), "is writable by group or others (mode 0777)") || perm(t, shared) != 0o777 {
		t.Errorf("0666 in a world-writable state folder: %v (mode now %04o)", err, perm(t, shared))
	}
}

// A socket elsewhere, in a folder (or under a parent) that other users
// cannot search, is refused with the folder and what to do.
func TestPrepareSocketDirRefusesUnreachableSocket(t *testing.T) {
	top := openTempDir(t)
	private := filepath.Join(top, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(top, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	groupOnly := filepath.Join(top, "group")
	if err := os.Mkdir(groupOnly, 0o710); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groupOnly, 0o710); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(top, "state")
	tests := []struct {
		socket string
		mode   os.FileMode
		want   string
	}{
		{filepath.Join(private, "t.sock"), 0o666, "--socket-mode 0666: the socket's group and other users could not reach " + filepath.Join(private, "t.sock") + ": folder " + private + " (mode 0700"},
		{filepath.Join(private, "t.sock"), 0o660, "the socket's group could not reach"},
		{filepath.Join(private, "sub", "t.sock"), 0o666, "folder " + filepath.Join(private, "sub") + " (mode 0700"},
		{filepath.Join(groupOnly, "t.sock"), 0o666, "--socket-mode 0666: other users could not reach"},
		{filepath.Join(private, "state", "t.sock"), 0o666, "folder " + private + " (mode 0700"},
		{filepath.Join(groupOnly, "t.sock"), 0o660, ""},
		{filepath.Join(open, "t.sock"), 0o666, ""},
		{filepath.Join(private, "t.sock"), 0o600, ""},
	}
	for _, tt := range tests {
		st := state
		if strings.Contains(tt.socket, "/state/") {
			st = filepath.Dir(tt.socket)
		}
		_, err := PrepareSocketDir(st, tt.socket, tt.mode)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %04o: %v", tt.socket, tt.mode, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "or keep --socket-mode 0600")):
			t.Errorf("%s %04o: %v\nwant %q", tt.socket, tt.mode, err, tt.want)
		}
	}
}

func TestEnsureToken(t *testing.T) {
	dir := t.TempDir()
	tok, path, created, err := EnsureToken(dir)
	if err != nil || !created || len(tok) != 43 || path != filepath.Join(dir, api.TokenFile) {
		t.Fatalf("first EnsureToken = %q, %q, %v, %v", tok, path, created, err)
	}
	if perm(t, path) != 0o600 {
		t.Errorf("token file mode %04o, want 0600", perm(t, path))
	}
	again, _, created, err := EnsureToken(dir)
	if err != nil || created || again != tok {
		t.Errorf("second EnsureToken = %q, %v, %v; want the same token, not created", again, created, err)
	}
	other, _, _, err := EnsureToken(t.TempDir())
	if err != nil || other == tok {
		t.Errorf("another state folder's token = %q, %v; want a different one", other, err)
	}
	for _, tc := range []struct {
		content string
		mode    os.FileMode
		want    string
	}{
		{tok + "\n", 0o644, "mode 0644 lets group or others read it; run chmod 600 " + path},
		{"short\n", 0o600, "must hold one token of at least 32 characters"},
		{"", 0o600, "must hold one token"},
	} {
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := EnsureToken(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("token file %q mode %04o: %v, want %q", tc.content, tc.mode, err, tc.want)
		}
	}
}
