package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/client"
)

// A NUL byte in a command argument or --env value is refused by tessera
// run before anything is sent (exit 2, naming the argument); the daemon
// refuses one sent by another client with a 400 naming the field and its
// index, and a missing working folder with a 400 naming the folder.
// Nothing is queued.
func TestSubmitRefusesNULAndMissingFolder(t *testing.T) {
	d := startUp(t, "1xH100")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "echo", "a", "b\x00c"}, "command[2]: contains a NUL byte (at byte 1)"},
		{[]string{"--env", "SECRET=ab\x00cd", "--", "true"}, "environment variable SECRET: contains a NUL byte (at byte 9)"},
	} {
		code, _, errs := tessera(append(append([]string{"run"}, d.host...), tt.args...)...)
		if code != exitUsage || !strings.Contains(errs, tt.want) {
			t.Errorf("run %q: exit %d, stderr %q; want %d and %q", tt.args, code, errs, exitUsage, tt.want)
		}
		if strings.Contains(errs, "cd") {
			t.Errorf("run %q: stderr %q quotes the value", tt.args, errs)
		}
	}

	c := client.New(filepath.Join(d.dir, "api.sock"))
	missing := filepath.Join(t.TempDir(), "gone")
	for _, tt := range []struct {
		name  string
		req   api.SubmitRequest
		field string
		want  string
	}{
		{"NUL in an argument", api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: []string{"/bin/echo", "a", "b\x00c"}}, "command[2]", "contains a NUL byte (at byte 1)"},
		{"NUL in the environment", api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: []string{"/bin/true"}, Env: []string{"X=\x00"}}, "env[0]", "contains a NUL byte (at byte 2)"},
		{"missing folder", api.SubmitRequest{GPU: map[string]string{"count": "1"}, Command: []string{"/bin/true"}, Dir: missing}, "dir", "the job's working folder " + missing + " does not exist"},
	} {
		_, err := c.Submit(context.Background(), tt.req)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Field != tt.field || !strings.Contains(ae.Msg, tt.want) {
			t.Errorf("%s: %v, want a 400 on field %q saying %q", tt.name, err, tt.field, tt.want)
		}
	}
	if jobs := psJobs(t, d.host); len(jobs) != 0 {
		t.Errorf("refused submissions queued %d jobs", len(jobs))
	}
}
