package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/client"
)

// recorder is a local HTTP server standing in for another user's program
// on a port the CLI was pointed at: it keeps everything it is sent, and
// passes it on to next when there is one (a relay to the real daemon).
type recorder struct {
	addr string
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T, next http.Handler) *recorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var dump bytes.Buffer
		_ = req.Header.Write(&dump)
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.RequestURI()+"\n"+dump.String()+"\n"+string(body))
		r.mu.Unlock()
		if next == nil {
			// Answer as a daemon that cannot prove anything would.
			writeJSON(w, http.StatusOK, api.Challenge{Nonce: "n", Proof: "p"})
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, req)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// Issue #34 (1): the CLI's client never hands the token, a submission or
// anything else to a server that cannot prove it holds the token for the
// address the client reached, and the real daemon accepts its proofs.
func TestClientSendsNothingToAnImpostor(t *testing.T) {
	f := newFixture(t, 0o600)
	daemonURL, _ := url.Parse("http://" + f.tcp)
	relay := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(daemonURL)
		r.Out.Host = f.tcp
	}}
	ctx := context.Background()
	sub := api.SubmitRequest{GPU: map[string]string{"compute": "0.1"}, Command: []string{"/bin/true"}, Env: []string{"SECRET=hunter2"}}

	for _, tc := range []struct {
		name string
		next http.Handler
	}{
		{"a program that answers anything", nil},
		{"a relay to the real daemon", relay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.jobCount(t)
			imp := newRecorder(t, tc.next)
			c, err := client.NewHTTP(imp.addr, f.token, "TESSERA_TOKEN")
			if err != nil {
				t.Fatal(err)
			}
			calls := map[string]func() error{
				"submit": func() error { _, err := c.Submit(ctx, sub); return err },
				"list":   func() error { _, err := c.Jobs(ctx); return err },
				"stop":   func() error { _, err := c.Stop(ctx, "job-1"); return err },
				"logs":   func() error { _, err := c.Logs(ctx, "job-1", "stdout", false, 0, io.Discard); return err },
			}
			for name, call := range calls {
				err := call()
				if !errors.Is(err, client.ErrNotTheDaemon) || !strings.Contains(err.Error(), "the token was not sent") {
					t.Errorf("%s through %s: err %v, want one wrapping ErrNotTheDaemon that says the token was not sent", name, tc.name, err)
				}
			}
			for _, req := range imp.requests() {
				if !strings.HasPrefix(req, "GET "+api.ChallengePath+"?client=") {
					t.Errorf("the impostor was sent more than challenges: %q", req)
				}
				if strings.Contains(req, f.token) || strings.Contains(req, "hunter2") {
					t.Errorf("the impostor saw the token or the environment: %q", req)
				}
			}
			if got := len(imp.requests()); got != len(calls) {
				t.Errorf("the impostor got %d requests, want one challenge per call (%d)", got, len(calls))
			}
			if after := f.jobCount(t); after != before {
				t.Errorf("jobs %d -> %d: something was submitted through the impostor", before, after)
			}
		})
	}

	// The daemon itself proves itself, and takes the client's proofs.
	c, err := client.NewHTTP(f.tcp, f.token, "TESSERA_TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Submit(ctx, sub)
	if err != nil {
		t.Fatalf("submit to the daemon with a proof: %v", err)
	}
	if j.OwnerUID == nil || *j.OwnerUID != f.uid() {
		t.Errorf("a proven caller acts as the daemon's user: owner %v, want %d", j.OwnerUID, f.uid())
	}

	// A client holding another token is told so, and sends nothing else.
	wrong, err := client.NewHTTP(f.tcp, strings.Repeat("x", 43), "TESSERA_TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Jobs(ctx); !errors.Is(err, client.ErrNotTheDaemon) || !strings.Contains(err.Error(), "not this daemon's") {
		t.Errorf("a wrong token: %v", err)
	}
}

// f.uid is the daemon's uid (this process's).
func (f *fixture) uid() uint32 { return uint32(os.Getuid()) }

// challenge asks the fixture's daemon for a challenge over TCP.
func (f *fixture) challenge(t *testing.T) api.Challenge {
	t.Helper()
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	code, out, _ := f.call(t, false, "GET", api.ChallengePath+"?client="+base64.RawURLEncoding.EncodeToString(raw[:]), "", nil)
	if code != 200 {
		t.Fatalf("challenge: %d %s", code, out)
	}
	var ch api.Challenge
	if err := json.Unmarshal([]byte(out), &ch); err != nil {
		t.Fatal(err)
	}
	return ch
}

// A proof opens one call: that method, URI and body, on this address,
// once, with this daemon's token.
func TestProofsAreSingleUseAndBound(t *testing.T) {
	f := newFixture(t, 0o600)
	_, port, _ := net.SplitHostPort(f.tcp)
	sum := sha256.Sum256([]byte(submitBody))
	hdr := func(nonce, proof string) map[string]string {
		return map[string]string{"Content-Type": "application/json", "Authorization": api.ProofHeader(nonce, proof)}
	}
	post := func(h map[string]string, body string) (int, string) {
		code, out, _ := f.call(t, false, "POST", "/v1/jobs", body, h)
		return code, out
	}

	ch := f.challenge(t)
	good := hdr(ch.Nonce, api.RequestProof(f.token, ch.Nonce, "POST", "/v1/jobs", sum, f.tcp))
	if code, out := post(good, submitBody); code != 201 {
		t.Fatalf("a proven submission: %d %s", code, out)
	}
	if code, out := post(good, submitBody); code != 401 || !strings.Contains(out, "used before") {
		t.Errorf("the same proof again: %d %s, want 401 naming a used nonce", code, out)
	}
	for _, tc := range []struct {
		name             string
		token, method    string
		uri, addr, body  string
		wantInAnswerText string
	}{
		{"another address (a relay on [::1])", f.token, "POST", "/v1/jobs", "[::1]:" + port, submitBody, "does not match"},
		{"another body", f.token, "POST", "/v1/jobs", f.tcp, strings.Replace(submitBody, "true", "false", 1), "does not match"},
		{"another path", f.token, "POST", "/v1/jobs/job-1/stop", f.tcp, submitBody, "does not match"},
		{"another token", strings.Repeat("y", 43), "POST", "/v1/jobs", f.tcp, submitBody, "does not match"},
	} {
		ch := f.challenge(t)
		proof := api.RequestProof(tc.token, ch.Nonce, tc.method, tc.uri, sum, tc.addr)
		if code, out := post(hdr(ch.Nonce, proof), tc.body); code != 401 || !strings.Contains(out, tc.wantInAnswerText) {
			t.Errorf("%s: %d %s, want 401 %q", tc.name, code, out, tc.wantInAnswerText)
		}
	}
	if code, out := post(hdr("made-up", "x"), submitBody); code != 401 || !strings.Contains(out, "unknown") {
		t.Errorf("a nonce the daemon never gave: %d %s", code, out)
	}
	if code, out, _ := f.call(t, true, "GET", api.ChallengePath+"?client=x", "", nil); code != 404 || !strings.Contains(out, "needs no token") {
		t.Errorf("a challenge over the socket: %d %s", code, out)
	}
	if code, out, _ := f.call(t, false, "GET", api.ChallengePath+"?client=short", "", nil); code != 400 || !strings.Contains(out, "client: must be 32 random bytes") {
		t.Errorf("a short client nonce: %d %s", code, out)
	}
	if f.jobCount(t) != 1 {
		t.Errorf("%d jobs, want the one proven submission", f.jobCount(t))
	}
}

// Nonces expire and are taken once; past the bound the oldest goes.
func TestNonces(t *testing.T) {
	now := time.Unix(1000, 0)
	n := newNonces(func() time.Time { return now })
	a, err := n.issue()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := n.issue()
	if !n.take(a) || n.take(a) {
		t.Error("a nonce is taken exactly once")
	}
	now = now.Add(challengeTTL + time.Second)
	if n.take(b) {
		t.Error("an expired nonce was taken")
	}
	first, _ := n.issue()
	for range maxChallenges {
		now = now.Add(time.Millisecond)
		if _, err := n.issue(); err != nil {
			t.Fatal(err)
		}
	}
	if len(n.issued) > maxChallenges {
		t.Errorf("%d nonces kept, bound %d", len(n.issued), maxChallenges)
	}
	if n.take(first) {
		t.Error("the oldest nonce was kept past the bound")
	}
}

// Issue #34 (1), the socket's side: a socket in a shared folder (such as
// /tmp) that another user bound, after the daemon went away, is not
// talked to: the client reads the server's uid (SO_PEERCRED) and sends
// nothing to one that is neither root, itself nor the folder's owner.
func TestClientRefusesAnotherUsersSocket(t *testing.T) {
	dir := openTempDir(t)
	u := asOtherUser(t, dir)
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil { // as /tmp
		t.Fatal(err)
	}
	sock := filepath.Join(shared, "tessera.sock")
	cmd := exec.Command(u.bin, "listen", sock)
	cmd.Dir = "/"
	cmd.Env = []string{peerEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "listening" {
		t.Fatalf("the other user's listener: %q", lines.Text())
	}
	c := client.New(sock)
	_, err = c.Submit(context.Background(), api.SubmitRequest{Command: []string{"/bin/true"}, Env: []string{"SECRET=hunter2"}})
	if !errors.Is(err, client.ErrNotTheDaemon) || !strings.Contains(err.Error(), fmt.Sprintf("served by uid %d", nobody)) {
		t.Errorf("submit to another user's socket: %v", err)
	}
	if !lines.Scan() || lines.Text() != "got 0 bytes" {
		t.Errorf("the other user's listener says %q, want that it got nothing", lines.Text())
	}
}
