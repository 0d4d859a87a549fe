package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/inventory"
)

// peerEnv makes the test binary a client of a daemon's socket (see
// peerMain): the tests run it as another user.
const peerEnv = "TESSERA_SERVER_TEST_PEER"

// superviseEnv makes the test binary a job supervisor (see TestMain): the
// daemons of the web UI tests start it for each job.
const superviseEnv = "TESSERA_SERVER_TEST_SUPERVISE"

func TestMain(m *testing.M) {
	if os.Getenv(peerEnv) == "1" {
		os.Exit(peerMain(os.Args[1:]))
	}
	// A fuzz worker (FuzzSubmit) inherits superviseEnv but is no supervisor.
	if os.Getenv(superviseEnv) == "1" && !slices.Contains(os.Args, "-test.fuzzworker") {
		os.Exit(supervisor.Run(os.Args[len(os.Args)-1]))
	}
	if err := os.Setenv(superviseEnv, "1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// peerMain does one thing and prints its outcome:
//
//	http SOCKET METHOD PATH BODY  -> "STATUS\nBODY", or "error: ..." (exit 3)
//	read PATH, readdir PATH       -> "ok", or "error: ..." (exit 4)
func peerMain(args []string) int {
	var err error
	switch {
	case len(args) == 5 && args[0] == "http":
		hc := unixHTTP(args[1])
		req, rerr := http.NewRequest(args[2], "http://tessera"+args[3], strings.NewReader(args[4]))
		if rerr != nil {
			fmt.Println("error:", rerr)
			return 3
		}
		if args[4] != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, derr := hc.Do(req)
		if derr != nil {
			fmt.Println("error:", derr)
			return 3
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		fmt.Printf("%d\n%s", resp.StatusCode, body)
		return 0
	case len(args) == 2 && args[0] == "listen":
		// Serve a unix socket at args[1], take one connection, print
		// how many bytes it was sent before it closed.
		l, lerr := net.Listen("unix", args[1])
		if lerr != nil {
			fmt.Println("error:", lerr)
			return 3
		}
		fmt.Println("listening")
		c, aerr := l.Accept()
		if aerr != nil {
			fmt.Println("error:", aerr)
			return 3
		}
		n, _ := io.Copy(io.Discard, c)
		fmt.Printf("got %d bytes\n", n)
		return 0
	case len(args) == 2 && args[0] == "read":
		_, err = os.ReadFile(args[1])
	case len(args) == 2 && args[0] == "readdir":
		_, err = os.ReadDir(args[1])
	default:
		fmt.Println("error: bad peer arguments", args)
		return 2
	}
	if err != nil {
		fmt.Println("error:", err)
		return 4
	}
	fmt.Println("ok")
	return 0
}

func unixHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// openTempDir is a fresh folder that every user may traverse (as /tmp
// is): the socket tests need a path other users can reach.
func openTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir makes a per-test folder and a numbered one in it, both 0700.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	for d := filepath.Dir(filepath.Dir(dir)); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("the temporary folder's parent %s is %04o: other users cannot traverse it, so no socket under it can be opened to them", d, fi.Mode().Perm())
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// fixture is a daemon (not running: jobs stay queued) behind the API on a
// unix socket in its state folder and on a loopback TCP port.
type fixture struct {
	d                *hostd.Daemon
	top, state, sock string
	tcp, token       string
}

func newFixture(t *testing.T, mode os.FileMode) *fixture {
	t.Helper()
	cat, source, nodes := simulatedHost(t, "2xH200")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &fixture{top: openTempDir(t)}
	f.state = filepath.Join(f.top, "state")
	f.sock = filepath.Join(f.state, "tessera.sock")
	var err error
	if f.d, err = hostd.New(hostd.Config{StateDir: f.state, Source: source, Simulated: true, Nodes: nodes, Catalog: cat, Supervisor: []string{"/bin/true"}, Log: log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.d.Close() })
	if _, err := PrepareSocketDir(f.state, f.sock, mode); err != nil {
		t.Fatal(err)
	}
	token, path, _, err := EnsureToken(f.state)
	if err != nil {
		t.Fatal(err)
	}
	f.token = token
	h, err := Handler(f.d, Options{Log: log, Token: token, TokenFile: path})
	if err != nil {
		t.Fatal(err)
	}
	ul, err := ListenUnix(f.sock, mode)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.tcp = tl.Addr().String()
	srv := &http.Server{Handler: h, ConnContext: ConnContext}
	go func() { _ = srv.Serve(ul) }()
	go func() { _ = srv.Serve(tl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// call sends a request over TCP (unix false) or the socket with exactly
// the headers given ("Host" sets the Host header).
func (f *fixture) call(t *testing.T, unix bool, method, path, body string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	hc, base := http.DefaultClient, "http://"+f.tcp
	if unix {
		hc, base = unixHTTP(f.sock), "http://tessera"
	}
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func (f *fixture) jobCount(t *testing.T) int {
	t.Helper()
	jobs, err := f.d.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

const submitBody = `{"gpu":{"compute":"0.1"},"command":["/bin/true"]}`

// Issue #14 (4): a web page must not run commands through --http, by a
// cross-site request or DNS rebinding, nor may another local user without
// the token; read-only pages stay readable but check Host too.
func TestTCPGuard(t *testing.T) {
	f := newFixture(t, 0o600)
	_, port, _ := net.SplitHostPort(f.tcp)
	evil := "evil.example:" + port
	bearer := "Bearer " + f.token
	jsonCT := "application/json"
	tests := []struct {
		name         string
		method, path string
		body         string
		hdr          map[string]string
		want         int
		msg          string
	}{
		{"the issue's curl: cross-site text/plain with a rebound Host", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": evil}, 403, `Host "evil.example:` + port + `" is not this daemon's address`},
		{"rebound Host, even with the token", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": jsonCT, "Host": evil, "Authorization": bearer}, 403, "DNS-rebinding"},
		{"rebound Host reading jobs", "GET", "/v1/jobs", "", map[string]string{"Host": evil}, 403, "is not this daemon's address"},
		{"rebound Host reading the status page", "GET", "/", "", map[string]string{"Host": evil}, 403, "is not this daemon's address"},
		{"rebound Host reading metrics", "GET", "/metrics", "", map[string]string{"Host": evil}, 403, "is not this daemon's address"},
		{"another port in Host", "GET", "/v1/status", "", map[string]string{"Host": "127.0.0.1:1"}, 403, "is not this daemon's address"},
		{"cross-site Origin with the right Host and token", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": jsonCT, "Origin": "http://evil.example", "Authorization": bearer}, 403, `Origin "http://evil.example" is not this daemon's own`},
		{"null Origin", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": jsonCT, "Origin": "null", "Authorization": bearer}, 403, "Origin"},
		{"loopback Origin of another port", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": jsonCT, "Origin": "http://127.0.0.1:1", "Authorization": bearer}, 403, "Origin"},
		{"text/plain body with the token", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": "text/plain", "Authorization": bearer}, 415, `Content-Type "text/plain": a POST body must be application/json`},
		{"form body with the token", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": bearer}, 415, "application/json"},
		{"no token", "POST", "/v1/jobs", submitBody, map[string]string{"Content-Type": jsonCT}, 401, "needs the daemon's API token"},
		{"wrong token", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": jsonCT, "Authorization": "Bearer " + strings.Repeat("x", 43)}, 401, "does not match"},
		{"token under another scheme", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": jsonCT, "Authorization": "Basic " + f.token}, 401, "does not match"},
		{"wrong token on a read", "GET", "/v1/jobs", "", map[string]string{"Authorization": "Bearer nope"}, 401, "does not match"},
		{"stop without the token", "POST", "/v1/jobs/job-1/stop", "", nil, 401, "API token"},
		{"the token", "POST", "/v1/jobs", submitBody, map[string]string{"Content-Type": jsonCT, "Authorization": bearer}, 201, `"ownerUid":` + strconv.Itoa(os.Getuid())},
		{"the token, charset, localhost and the daemon's own Origin", "POST", "/v1/jobs", submitBody,
			map[string]string{"Content-Type": "application/json; charset=utf-8", "Authorization": bearer, "Host": "localhost:" + port, "Origin": "http://localhost:" + port}, 201, `"state":"queued"`},
		{"status page without a token", "GET", "/", "", nil, 200, "Tessera host"},
		{"metrics without a token", "GET", "/metrics", "", nil, 200, "tessera_host_jobs"},
		{"status without a token", "GET", "/v1/status", "", map[string]string{"Host": "LOCALHOST:" + port}, 200, "sim:2xH200"},
		{"stop with the token", "POST", "/v1/jobs/job-1/stop", "", map[string]string{"Authorization": bearer}, 200, `"state":"stopped"`},
	}
	created := 0
	for _, tt := range tests {
		code, body, hdr := f.call(t, false, tt.method, tt.path, tt.body, tt.hdr)
		if e := (api.Error{}); code >= 400 && json.Unmarshal([]byte(body), &e) == nil {
			body = e.Error
		}
		if code != tt.want || !strings.Contains(body, tt.msg) {
			t.Errorf("%s: %s %s answered %d %s; want %d with %q", tt.name, tt.method, tt.path, code, body, tt.want, tt.msg)
		}
		if code == 401 && hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tt.name)
		}
		if code == 401 && !strings.Contains(body, filepath.Join(f.state, api.TokenFile)) {
			t.Errorf("%s: 401 does not say where the token is: %s", tt.name, body)
		}
		if tt.want == 201 {
			created++
		}
	}
	if n := f.jobCount(t); n != created {
		t.Errorf("%d jobs queued, want %d (only the requests with the token)", n, created)
	}
}

// The socket takes any Host and no token, but still refuses cross-site
// Origins and non-JSON bodies (a local proxy might expose it to browsers).
func TestUnixGuard(t *testing.T) {
	f := newFixture(t, 0o600)
	tests := []struct {
		name         string
		method, path string
		body         string
		hdr          map[string]string
		want         int
	}{
		{"any Host", "GET", "/v1/status", "", map[string]string{"Host": "evil.example:80"}, 200},
		{"submit without a token", "POST", "/v1/jobs", submitBody, map[string]string{"Content-Type": "application/json"}, 201},
		{"text/plain", "POST", "/v1/jobs", submitBody, map[string]string{"Content-Type": "text/plain"}, 415},
		{"no Content-Type on a body", "POST", "/v1/jobs", submitBody, nil, 415},
		{"cross-site Origin", "POST", "/v1/jobs", submitBody, map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403},
		{"stop without a body", "POST", "/v1/jobs/job-1/stop", "", nil, 200},
	}
	for _, tt := range tests {
		if code, body, _ := f.call(t, true, tt.method, tt.path, tt.body, tt.hdr); code != tt.want {
			t.Errorf("%s: %s %s answered %d %s; want %d", tt.name, tt.method, tt.path, code, body, tt.want)
		}
	}
	if n := f.jobCount(t); n != 1 {
		t.Errorf("%d jobs queued, want 1", n)
	}
}

// Issue #14 (6): the job list serves a job's whole environment to its
// owner only; anyone else sees its TESSERA_*, CUDA_* and NVIDIA_*
// variables (TESSERA_TOKEN excepted), and not its output.
func TestEnvShownToOwnerOnly(t *testing.T) {
	f := newFixture(t, 0o600)
	env := []string{"SECRET=hunter2", "TESSERA_QUEUE_HINT=a", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "PATH=/usr/bin"}
	command := []string{"/bin/sh", "-c", "echo --password=hunter3"}
	body, _ := json.Marshal(api.SubmitRequest{GPU: map[string]string{"compute": "0.1"}, Command: command, Env: env, Dir: "/tmp"})
	code, out, _ := f.call(t, true, "POST", "/v1/jobs", string(body), map[string]string{"Content-Type": "application/json"})
	if code != 201 {
		t.Fatalf("submit: %d %s", code, out)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.OwnerUID == nil || *j.OwnerUID != uint32(os.Getuid()) {
		t.Errorf("owner recorded = %v, want the socket peer's uid %d", j.OwnerUID, os.Getuid())
	}
	if len(j.Env) != 0 || !j.EnvFiltered {
		t.Errorf("the submission's answer echoes the environment: %s", out)
	}
	bearer := map[string]string{"Authorization": "Bearer " + f.token}
	for _, tc := range []struct {
		name    string
		unix    bool
		hdr     map[string]string
		query   string
		env     []string
		command []string
		dir     string
		code    int // of GET /v1/jobs/{id} with the query
		logs    int
	}{
		{"TCP without a token (nobody)", false, nil, "", nil, []string{"sh"}, "", 200, 403},
		{"TCP without a token asking for the environment", false, nil, "?env=true", nil, []string{"sh"}, "", 403, 403},
		{"TCP with the token (the daemon's user)", false, bearer, "", nil, command, "/tmp", 200, 200},
		{"TCP with the token asking for the environment", false, bearer, "?env=true", env, command, "/tmp", 200, 200},
		{"the socket, as the owner", true, nil, "", nil, command, "/tmp", 200, 200},
		{"the socket, as the owner asking for the environment", true, nil, "?env=true", env, command, "/tmp", 200, 200},
	} {
		for _, path := range []string{"/v1/jobs", "/v1/jobs/" + j.ID} {
			code, out, _ := f.call(t, tc.unix, "GET", path+tc.query, "", tc.hdr)
			var got []api.Job
			if path == "/v1/jobs" {
				_ = json.Unmarshal([]byte(out), &got)
			} else {
				if code != tc.code {
					t.Errorf("%s: GET %s%s answered %d %s, want %d", tc.name, path, tc.query, code, out, tc.code)
				}
				if code != 200 {
					continue
				}
				got = make([]api.Job, 1)
				_ = json.Unmarshal([]byte(out), &got[0])
			}
			if len(got) != 1 || !slices.Equal(got[0].Env, tc.env) || got[0].EnvFiltered != (tc.env == nil) ||
				!slices.Equal(got[0].Command, tc.command) || got[0].Dir != tc.dir || got[0].Filtered != (tc.dir == "") {
				t.Errorf("%s: GET %s%s = %s\nwant env %q, command %q, dir %q", tc.name, path, tc.query, out, tc.env, tc.command, tc.dir)
			}
			if !tc.unix && tc.hdr == nil && (strings.Contains(out, "hunter") || strings.Contains(out, "PCI_BUS_ID")) {
				t.Errorf("%s: an anonymous read shows a secret: %s", tc.name, out)
			}
		}
		if code, out, _ := f.call(t, tc.unix, "GET", "/v1/jobs/"+j.ID+"/logs", "", tc.hdr); code != tc.logs {
			t.Errorf("%s: logs answered %d %s, want %d", tc.name, code, out, tc.logs)
		}
	}
	if code, out, _ := f.call(t, true, "GET", "/v1/jobs?env=yes", "", nil); code != 400 || !strings.Contains(out, `env: must be true or false, got \"yes\"`) {
		t.Errorf("?env=yes: %d %s", code, out)
	}
}

// Who may see a job whole and stop it: its owner, the daemon's user, root.
func TestMayManage(t *testing.T) {
	s := &Server{uid: 1000}
	own := func(uid uint32) api.Job { return api.Job{OwnerUID: &uid} }
	tests := []struct {
		name string
		c    caller
		j    api.Job
		want bool
	}{
		{"owner", caller{uid: 2000, known: true}, own(2000), true},
		{"another user", caller{uid: 3000, known: true}, own(2000), false},
		{"the daemon's user", caller{uid: 1000, known: true}, own(2000), true},
		{"root", caller{uid: 0, known: true}, own(2000), true},
		{"nobody", caller{}, own(2000), false},
		{"nobody is not root", caller{}, own(0), false},
		{"an old record is the daemon user's", caller{uid: 2000, known: true}, api.Job{}, false},
		{"an old record, the daemon's user", caller{uid: 1000, known: true}, api.Job{}, true},
	}
	for _, tt := range tests {
		if got := s.mayManage(tt.c, tt.j); got != tt.want {
			t.Errorf("%s: mayManage = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// otherUser runs the test binary's peerMain as uid/gid 65534 (nobody).
type otherUser struct {
	t   *testing.T
	bin string
}

const nobody = 65534

func asOtherUser(t *testing.T, dir string) *otherUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: connecting as another user (uid 65534) needs root to set the client's credentials; run the tests as root to cover it")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	u := &otherUser{t: t, bin: filepath.Join(bin, "peer")}
	if err := os.WriteFile(u.bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u *otherUser) run(args ...string) (int, string) {
	u.t.Helper()
	cmd := exec.Command(u.bin, args...)
	cmd.Dir = "/"
	cmd.Env = []string{peerEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatalf("run the peer: %v", err)
	}
	return code, string(out)
}

// http returns the answer's status and body, or fails when the peer could
// not connect.
func (u *otherUser) http(sock, method, path, body string) (int, string) {
	u.t.Helper()
	code, out := u.run("http", sock, method, path, body)
	if code != 0 {
		u.t.Fatalf("uid %d: %s %s: %s", nobody, method, path, out)
	}
	status, rest, _ := strings.Cut(out, "\n")
	n, err := strconv.Atoi(status)
	if err != nil {
		u.t.Fatalf("peer output %q", out)
	}
	return n, rest
}

// Issue #14 (5) and (6), with real connections from another uid:
// --socket-mode 0666 at the default place (the state folder) lets another
// user connect, without letting them list or read the state folder; they
// see other users' jobs without their secrets or output and cannot stop
// them, and manage their own jobs.
func TestSocketModeAndOwnersAsAnotherUser(t *testing.T) {
	f := newFixture(t, 0o666)
	u := asOtherUser(t, f.top)
	if fi, err := os.Stat(f.state); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("state folder: %v, %v; want mode 0711", fi.Mode(), err)
	}
	// A job of this process's user (root) and one recorded before owners were.
	body, _ := json.Marshal(api.SubmitRequest{GPU: map[string]string{"compute": "0.1"}, Command: []string{"/bin/true"}, Env: []string{"SECRET=mine", "TESSERA_X=1"}})
	if code, out, _ := f.call(t, true, "POST", "/v1/jobs", string(body), map[string]string{"Content-Type": "application/json"}); code != 201 {
		t.Fatalf("submit: %d %s", code, out)
	}
	if _, err := f.d.Submit(api.SubmitRequest{GPU: map[string]string{"compute": "0.1"}, Command: []string{"/bin/true"}, Env: []string{"SECRET=old"}}); err != nil {
		t.Fatal(err)
	}

	if code, out := u.http(f.sock, "GET", "/v1/status", ""); code != 200 {
		t.Fatalf("uid %d could not use the 0666 socket in the state folder: %d %s", nobody, code, out)
	}
	code, out := u.http(f.sock, "GET", "/v1/jobs", "")
	if code != 200 || strings.Contains(out, "SECRET") || strings.Contains(out, "TESSERA_X=1") || strings.Contains(out, "/bin/true") ||
		strings.Count(out, `"envFiltered":true`) != 2 || strings.Count(out, `"filtered":true`) != 2 {
		t.Errorf("uid %d lists: %d %s; want both jobs without their environment, command lines and folders", nobody, code, out)
	}
	if code, out := u.http(f.sock, "GET", "/v1/jobs?env=true", ""); code != 200 || strings.Contains(out, "SECRET") {
		t.Errorf("uid %d lists others' jobs asking for environments: %d %s; want none shown", nobody, code, out)
	}
	for _, id := range []string{"job-1", "job-2"} {
		if code, out := u.http(f.sock, "POST", "/v1/jobs/"+id+"/stop", ""); code != 403 || !strings.Contains(out, "only its owner (uid 0), the daemon's user (uid 0) or root may stop it; this request is from uid 65534") {
			t.Errorf("uid %d stops %s: %d %s; want 403", nobody, id, code, out)
		}
		if code, out := u.http(f.sock, "GET", "/v1/jobs/"+id+"/logs", ""); code != 403 {
			t.Errorf("uid %d reads the output of %s: %d %s; want 403", nobody, id, code, out)
		}
	}
	body, _ = json.Marshal(api.SubmitRequest{GPU: map[string]string{"compute": "0.1"}, Command: []string{"/bin/true"}, Env: []string{"SECRET=theirs"}})
	if code, out := u.http(f.sock, "POST", "/v1/jobs", string(body)); code != 201 || !strings.Contains(out, `"ownerUid":65534`) {
		t.Fatalf("uid %d submits: %d %s", nobody, code, out)
	}
	if code, out := u.http(f.sock, "GET", "/v1/jobs/job-3", ""); code != 200 || strings.Contains(out, "SECRET=theirs") || !strings.Contains(out, `"command":["/bin/true"]`) {
		t.Errorf("uid %d reads its own job unasked: %d %s; want its command, no environment", nobody, code, out)
	}
	if code, out := u.http(f.sock, "GET", "/v1/jobs/job-3?env=true", ""); code != 200 || !strings.Contains(out, "SECRET=theirs") {
		t.Errorf("uid %d reads its own job with ?env=true: %d %s; want its whole env", nobody, code, out)
	}
	if code, out := u.http(f.sock, "GET", "/v1/jobs/job-1?env=true", ""); code != 403 {
		t.Errorf("uid %d asks for root's job's environment: %d %s; want 403", nobody, code, out)
	}
	if code, out := u.http(f.sock, "POST", "/v1/jobs/job-3/stop", ""); code != 200 {
		t.Errorf("uid %d stops its own job: %d %s", nobody, code, out)
	}
	_, out, _ = f.call(t, true, "GET", "/v1/jobs?env=true", "", nil)
	for _, s := range []string{"SECRET=mine", "SECRET=old", "SECRET=theirs"} {
		if !strings.Contains(out, s) {
			t.Errorf("root's list lacks %s: %s", s, out)
		}
	}
	// Traverse, not list; and nothing in it is readable.
	for _, op := range [][]string{{"readdir", f.state}, {"read", filepath.Join(f.state, "jobs.db")}, {"read", filepath.Join(f.state, api.TokenFile)}, {"readdir", filepath.Join(f.state, "jobs")}} {
		if code, out := u.run(op...); code != 4 || !strings.Contains(out, "permission denied") {
			t.Errorf("uid %d %v: %d %s; want permission denied", nobody, op, code, out)
		}
	}

	// Back to 0600: the state folder closes again and the peer is refused.
	notes, err := PrepareSocketDir(f.state, f.sock, 0o600)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "back to 0700") {
		t.Fatalf("PrepareSocketDir 0600 = %q, %v", notes, err)
	}
	if err := os.Chmod(f.sock, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := u.run("http", f.sock, "GET", "/v1/status", ""); code != 3 || !strings.Contains(out, "permission denied") {
		t.Errorf("uid %d on a 0600 socket: %d %s; want permission denied", nobody, code, out)
	}
}

// With the default mode, another user cannot connect at all.
func TestOwnerOnlySocketRefusesAnotherUser(t *testing.T) {
	f := newFixture(t, 0o600)
	u := asOtherUser(t, f.top)
	if code, out := u.run("http", f.sock, "GET", "/v1/status", ""); code != 3 || !strings.Contains(out, "permission denied") {
		t.Errorf("uid %d on the default socket: %d %s; want permission denied", nobody, code, out)
	}
}

// simulatedHost discovers simulated GPUs (spec, e.g. "2xH200") as the
// daemon does: the catalog, the source's name and the nodes.
func simulatedHost(t *testing.T, spec string) (*catalog.Catalog, string, []inventory.Node) {
	t.Helper()
	cat := catalog.Default()
	src, err := discovery.Open("sim:"+spec, cat)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cat, src.Name(), nodes
}
