package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/agent/libinstall"
)

// fakeLib writes a library file (ELF magic, then content) and returns its path.
func fakeLib(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), libinstall.File)
	if err := os.WriteFile(path, []byte("\x7fELF"+content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestInstallLibCommand(t *testing.T) {
	lib := fakeLib(t, "A")
	notELF := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notELF, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.so")
	folder := t.TempDir()
	tests := []struct {
		name     string
		args     []string
		code     int
		want     string // in stdout when code is 0, else in stderr
		wantLink bool
	}{
		{"installs", []string{"--from", lib, "--to", "TO"}, 0, "installed " + libinstall.File + " ", true},
		{"no --to", []string{"--from", lib}, 2, "--to: must name the node folder", false},
		{"empty --from", []string{"--from", "", "--to", "TO"}, 2, "--from: must name the library file", false},
		{"missing --from", []string{"--from", missing, "--to", "TO"}, 2, fmt.Sprintf("--from %q: ", missing), false},
		{"--from a folder", []string{"--from", folder, "--to", "TO"}, 2, fmt.Sprintf("--from %q: must be a file, not a folder", folder), false},
		{"--from not ELF", []string{"--from", notELF, "--to", "TO"}, 2, fmt.Sprintf("--from %q: not an ELF shared library", notELF), false},
		{"--to a file", []string{"--from", lib, "--to", aFile}, 1, fmt.Sprintf("--to %q: ", aFile), false},
		{"--keep 0", []string{"--from", lib, "--to", "TO", "--keep", "0"}, 2, "--keep: must be in [1, 100], got 0", false},
		{"--keep not a number", []string{"--from", lib, "--to", "TO", "--keep", "many"}, 2, `--keep: must be a whole number in [1, 100], got "many"`, false},
		{"an argument", []string{"--from", lib, "--to", "TO", "extra"}, 2, `unexpected argument "extra"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			to := filepath.Join(t.TempDir(), "lib")
			args := append([]string{"install-lib"}, tc.args...)
			for i, a := range args {
				if a == "TO" {
					args[i] = to
				}
			}
			var out, errb bytes.Buffer
			code := Execute(t.Context(), args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, out.String(), errb.String())
			}
			text := errb.String()
			if tc.code == 0 {
				text = out.String()
				if strings.Count(text, "\n") != 1 {
					t.Errorf("printed %q, want one line", text)
				}
			}
			if !strings.Contains(text, tc.want) {
				t.Errorf("output %q lacks %q", text, tc.want)
			}
			if _, err := os.Stat(filepath.Join(to, libinstall.File)); (err == nil) != tc.wantLink {
				t.Errorf("library at %s: %v, want present %v", to, err, tc.wantLink)
			}
		})
	}
}
