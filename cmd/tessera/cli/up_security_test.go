package cli

import (
	"bytes"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// waitListening waits until something accepts connections at addr (a
// liveness bound, not a performance one).
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens at %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freeLoopbackAddr is a loopback address whose port was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// The CLI reaches a `tessera up --http` daemon with --addr, sending the
// token of the state folder (or TESSERA_TOKEN); without the right one it
// says what to do, and reads show other users' jobs without their secrets.
func TestAddrUsesTheToken(t *testing.T) {
	addr := freeLoopbackAddr(t)
	d := startUp(t, "1xH200", "--http", addr)
	waitListening(t, addr) // startUp waits for the socket; the TCP listener may come a moment later
	tokenFile := filepath.Join(d.dir, api.TokenFile)
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v; want mode 0600", fi, err)
	}
	data, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(data))
	tcp := []string{"--addr", "http://" + addr, "--state-dir", d.dir}
	noToken := []string{"--addr", addr, "--state-dir", t.TempDir()}

	t.Setenv("MY_SECRET", "s3cret")
	t.Setenv(api.TokenEnv, "")
	code, out, errs := tessera(append(append([]string{"run", "-d", "--env", "MY_SECRET"}, tcp...), "--", "sleep", "600")...)
	if code != 0 {
		t.Fatalf("run over TCP with the state folder's token: %d %s", code, errs)
	}
	id := strings.TrimSpace(out)
	t.Setenv(api.TokenEnv, token)
	if code, _, errs := tessera(append(append([]string{"run", "-d"}, noToken...), "--", "true")...); code != 0 {
		t.Errorf("run over TCP with %s: %d %s", api.TokenEnv, code, errs)
	}

	t.Setenv(api.TokenEnv, "")
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want []string
	}{
		{"no token", append(append([]string{"run", "-d"}, noToken...), "--", "true"), "",
			[]string{"refused POST /v1/jobs", "No token was sent: " + api.TokenEnv + " is empty and there is no ", api.TokenFile}},
		{"wrong token", append(append([]string{"stop"}, tcp...), id), strings.Repeat("x", 43),
			[]string{"could not prove it holds the API token", "the token was not sent", "or the token (from " + api.TokenEnv + ") is not this daemon's"}},
		{"not loopback", []string{"ps", "--addr", "http://example.com:9400"}, "",
			[]string{"--addr: must be http://127.0.0.1:PORT"}},
		{"both --addr and --socket", []string{"ps", "--addr", addr, "--socket", filepath.Join(d.dir, "api.sock")}, "",
			[]string{"--addr and --socket: give one"}},
		{"nobody there", []string{"ps", "--addr", freeLoopbackAddr(t)}, "",
			[]string{"cannot reach the tessera daemon at http://127.0.0.1:", "tessera up --http"}},
	} {
		t.Setenv(api.TokenEnv, tc.env)
		code, _, errs := tessera(tc.args...)
		for _, w := range tc.want {
			if code == 0 || !strings.Contains(errs, w) {
				t.Errorf("%s: %v: exit %d, stderr %q; want %q", tc.name, tc.args, code, errs, w)
			}
		}
	}
	t.Setenv(api.TokenEnv, "")

	// Without a token a read is anonymous: no secrets; with it, everything,
	// except the token itself, which tessera run never sends.
	find := func(jobs []api.Job) api.Job {
		for _, j := range jobs {
			if j.ID == id {
				return j
			}
		}
		t.Fatalf("no %s in %+v", id, jobs)
		return api.Job{}
	}
	anon, owner := find(psJobs(t, noToken)), find(psJobs(t, append([]string{"--show-env"}, tcp...)))
	if len(anon.Env) != 0 || !anon.EnvFiltered || !anon.Filtered || !slices.Equal(anon.Command, []string{"sleep"}) {
		t.Errorf("anonymous read of %s: env %q, filtered %v, command %q", id, anon.Env, anon.EnvFiltered, anon.Command)
	}
	if plain := find(psJobs(t, tcp)); len(plain.Env) != 0 || !plain.EnvFiltered {
		t.Errorf("a read without --show-env shows the environment: %q", plain.Env)
	}
	if !slices.Contains(owner.Env, "MY_SECRET=s3cret") || owner.EnvFiltered || owner.OwnerUID == nil || *owner.OwnerUID != uint32(os.Getuid()) {
		t.Errorf("read with the token: env has MY_SECRET %v, filtered %v, owner %v", slices.Contains(owner.Env, "MY_SECRET=s3cret"), owner.EnvFiltered, owner.OwnerUID)
	}
	for _, j := range psJobs(t, append([]string{"--show-env"}, tcp...)) {
		for _, kv := range j.Env {
			if strings.HasPrefix(kv, api.TokenEnv+"=") {
				t.Errorf("%s was submitted with %s", j.ID, kv)
			}
		}
	}
	if code, out, errs := tessera(append(append([]string{"stop"}, tcp...), id)...); code != 0 || !strings.Contains(out, id+": stopping") {
		t.Errorf("stop over TCP with the token: %d %s %s", code, out, errs)
	}
}

// Issue #14 (5): --socket-mode 0666 with the socket in the state folder
// makes the folder traversable (0711) and leaves everything in it
// owner-only, jobs' files included; a socket other users could not reach
// is refused.
func TestUpSocketModeOpensStateFolder(t *testing.T) {
	d := &daemon{t: t, dir: t.TempDir(), spec: "1xH200"}
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(filepath.Dir(d.dir)); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not traversable by others (%v, %v): no socket under it can be opened to them", p, fi.Mode(), err)
		}
		if filepath.Dir(p) == p {
			break
		}
	}
	sock := filepath.Join(d.dir, "api.sock")
	d.host = []string{"--state-dir", d.dir, "--socket", sock}
	d.extra = []string{"--socket-mode", "0666", "--http", freeLoopbackAddr(t)}
	d.start()
	t.Cleanup(d.stop)
	if code, out, errs := tessera(append(append([]string{"run"}, d.host...), "--", "sh", "-c", "echo hi; echo oops >&2")...); code != 0 || out != "hi\n" {
		t.Fatalf("run: %d %q %s", code, out, errs)
	}
	// What others can reach: the state folder (traverse only) and the
	// socket. Anything else directly in it must be owner-only; deeper
	// entries are out of reach behind owner-only folders (the arbiter's
	// grant region in jobs/JOB/shm is 0666, for instance).
	want := map[string]fs.FileMode{d.dir: 0o711, sock: 0o666}
	reachable := map[string]bool{d.dir: true}
	seen := 0
	err := filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		seen++
		p := info.Mode().Perm()
		if w, ok := want[path]; ok {
			if p != w {
				t.Errorf("%s: mode %04o, want %04o", path, p, w)
			}
			return nil
		}
		if !reachable[filepath.Dir(path)] {
			return nil
		}
		if p&0o077 != 0 {
			t.Errorf("%s: mode %04o: group or others may use it, and they can reach it through the traversable state folder", path, p)
		}
		reachable[path] = e.IsDir() && p&0o011 != 0
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 8 {
		t.Errorf("walked %d entries; expected the database, token, socket and a job's folder and files", seen)
	}

	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	code, _, errs := tessera("up", "--simulate", "1xH200", "--state-dir", t.TempDir(), "--socket", filepath.Join(private, "t.sock"), "--socket-mode", "0660")
	if code == 0 || !strings.Contains(errs, "--socket-mode 0660: the socket's group could not reach "+filepath.Join(private, "t.sock")) {
		t.Errorf("up with a 0660 socket in a private folder: %d %s", code, errs)
	}
}

// Issue #34 (1): pointed at a port another program holds (a typo, or the
// daemon's port taken while it restarted), the CLI sends it neither the
// token nor a job nor its environment: the program cannot prove it holds
// the state folder's token, and the CLI says so.
func TestAddrRefusesAnImpostor(t *testing.T) {
	addr := freeLoopbackAddr(t)
	d := startUp(t, "1xH200", "--http", addr)
	waitListening(t, addr)
	data, err := os.ReadFile(filepath.Join(d.dir, api.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(data))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var dump bytes.Buffer
		_ = r.Write(&dump)
		mu.Lock()
		seen = append(seen, dump.String())
		mu.Unlock()
		// What a program would answer to pass for the daemon.
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"nonce":"abc","proof":"def","id":"job-1"}`)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	impostor := []string{"--addr", "http://" + l.Addr().String(), "--state-dir", d.dir}

	t.Setenv(api.TokenEnv, "")
	t.Setenv("MY_SECRET", "s3cret")
	for _, args := range [][]string{
		{"ps"},
		{"run", "-d", "--env-all", "--", "touch", filepath.Join(t.TempDir(), "pwned")},
		{"stop", "job-1"},
		{"logs", "job-1"},
	} {
		code, _, errs := tessera(append(append([]string{args[0]}, impostor...), args[1:]...)...)
		if code == 0 || !strings.Contains(errs, "could not prove it holds the API token") || !strings.Contains(errs, "the token was not sent") {
			t.Errorf("%v through an impostor: exit %d, stderr %q", args, code, errs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, req := range seen {
		if !strings.HasPrefix(req, "GET "+api.ChallengePath+"?client=") || strings.Contains(req, token) || strings.Contains(req, "s3cret") || strings.Contains(req, "pwned") {
			t.Errorf("the impostor was sent %q", req)
		}
	}
	if len(seen) != 4 {
		t.Errorf("the impostor got %d requests, want one challenge per command", len(seen))
	}
}
