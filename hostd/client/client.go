package client

import (
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
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/peer"
	"github.com/tessera-gpu/tessera/webui"
)

// ErrUnreachable is wrapped by errors that mean the daemon could not be
// reached or went away mid-answer (not running, restarting): retrying later
// may succeed.
var ErrUnreachable = errors.New("cannot reach the tessera daemon")

// Client is a connection to one daemon.
type Client struct {
	// base is the URL paths are appended to; where names the daemon in
	// messages (the socket, or the TCP address).
	base, where string
	// token is sent as a bearer token over TCP; tokenFrom says where it
	// came from (or where none was found), for 401 messages.
	token, tokenFrom string
	hc               *http.Client
	// timeout bounds each call (SetTimeout); 0: none.
	timeout time.Duration
}

// socketBase is the base URL of calls over the unix socket.
const socketBase = "http://tessera"

// New returns a client for the daemon serving socket. The socket needs no
// token: its file mode says who may connect, and the daemon knows the
// peer's uid. The client talks only to a daemon run by root, by this
// user or by the owner of the socket's folder (trustedDaemon): in a
// shared folder such as /tmp, a socket another user bound after the
// daemon went away is refused before anything is sent.
func New(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, err
			}
			if err := trustedDaemon(c, socket); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		},
	}
	return &Client{base: socketBase, where: socket, hc: &http.Client{Transport: tr}}
}

// trustedDaemon checks who serves the socket c reached: root, this
// process's user, or the owner of the socket's folder (who could replace
// the socket anyway). Where the peer's uid cannot be read (off Linux) it
// trusts the folder's permissions alone.
func trustedDaemon(c net.Conn, socket string) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil
	}
	uid, err := peer.UID(uc)
	if err != nil {
		return nil
	}
	if uid == 0 || int(uid) == os.Geteuid() {
		return nil
	}
	dir := filepath.Dir(socket)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: socket %s: its folder: %w", ErrNotTheDaemon, socket, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
		return nil
	}
	return fmt.Errorf("%w: the socket %s is served by uid %d, which is neither root, you (uid %d) nor the owner of %s; "+
		"nothing was sent to it (another user's program may have taken the socket's name after the daemon stopped): check --socket / TESSERA_SOCKET",
		ErrNotTheDaemon, socket, uid, os.Geteuid(), dir)
}

// NewHTTP returns a client for the daemon serving its API over TCP at
// addr (tessera up --http): http://127.0.0.1:PORT, http://[::1]:PORT or
// http://localhost:PORT (the scheme may be left out). The daemon accepts
// only loopback addresses, and the token must not cross a network. token
// is sent with every call ("" : none; only reads then succeed); tokenFrom
// says where it came from, or where it was looked for, for messages.
func NewHTTP(addr, token, tokenFrom string) (*Client, error) {
	base, err := loopbackURL(addr)
	if err != nil {
		return nil, err
	}
	return &Client{base: base, where: base, token: token, tokenFrom: tokenFrom, hc: &http.Client{}}, nil
}

// loopbackURL checks a daemon TCP address and returns it as a base URL.
func loopbackURL(addr string) (string, error) {
	bad := fmt.Errorf("must be http://127.0.0.1:PORT, http://[::1]:PORT or http://localhost:PORT (the daemon's tessera up --http address; its token must not cross a network), got %q", addr)
	raw := addr
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") || u.Port() == "" {
		return "", bad
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); !strings.EqualFold(h, "localhost") && (ip == nil || !ip.IsLoopback()) {
		return "", bad
	}
	return "http://" + u.Host, nil
}

// Where names the daemon this client talks to: its socket or its URL.
func (c *Client) Where() string { return c.where }

// APIError is an error answer from the daemon.
type APIError struct {
	Status int
	// Msg is the daemon's message; Field the input field at fault, if any.
	Msg   string
	Field string
}

func (e *APIError) Error() string { return e.Msg }

// ErrTimeout is wrapped by errors that mean the daemon did not answer
// within the client's timeout (SetTimeout): it is stopped, frozen or
// overloaded. It also wraps ErrUnreachable: asking again later may succeed.
var ErrTimeout = errors.New("the tessera daemon did not answer in time")

// ErrNotTheDaemon is wrapped by errors that mean the server at a TCP
// address could not prove that it holds the API token: it is not the
// daemon of this state folder, and nothing was sent to it.
var ErrNotTheDaemon = errors.New("not the tessera daemon of this state folder")

// errCallTimeout is the cause a call's context ends with when the call
// ran past the client's timeout.
var errCallTimeout = errors.New("call timed out")

// SetTimeout bounds every call: a whole answer for short calls, the start
// of the answer for logs, and, for Wait, the gap between the daemon's
// heartbeats (at least 3 x api.WaitHeartbeat). 0 waits as long as it takes.
func (c *Client) SetTimeout(d time.Duration) { c.timeout = d }

// Timeout is the client's timeout (SetTimeout).
func (c *Client) Timeout() time.Duration { return c.timeout }

// callContext bounds one short call by the client's timeout.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, c.timeout, errCallTimeout)
}

// timedOut turns an error of a call whose context ran past the client's
// timeout into one that says so.
func (c *Client) timedOut(ctx context.Context, method, path string, err error) error {
	if context.Cause(ctx) != errCallTimeout {
		return err
	}
	return fmt.Errorf("%w (%w): %s %s at %s got no answer within %s; it may be stopped (kill -STOP), frozen or overloaded (check it with tessera ps, or wait longer with --timeout)",
		ErrTimeout, ErrUnreachable, method, path, c.where, c.timeout)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = data
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return c.timedOut(ctx, method, path, err)
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return c.timedOut(ctx, method, path, fmt.Errorf("decode daemon answer to %s %s: %w", method, path, err))
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		auth, err := c.prove(ctx, req, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w at %s: it is shutting down", ErrUnreachable, c.where)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var body api.Error
		e := &APIError{Status: resp.StatusCode}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == "" {
			e.Msg = fmt.Sprintf("daemon answered %s to %s %s", resp.Status, method, path)
		} else {
			e.Msg, e.Field = body.Error, body.Field
		}
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			e.Msg = fmt.Sprintf("the daemon at %s refused %s %s: %s. %s", c.where, method, path, e.Msg, c.tokenHint())
		case http.StatusForbidden:
			e.Msg = fmt.Sprintf("the daemon at %s refused %s %s: %s", c.where, method, path, e.Msg)
		}
		return nil, e
	}
	return resp, nil
}

// roundTrip sends req, made with ctx, and says why it got no answer: the
// caller's cancellation as is, the client's timeout as the transport
// error (timedOut words it), a socket served by an untrusted user as
// ErrNotTheDaemon, anything else as an unreachable daemon.
func (c *Client) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err == nil {
		return resp, nil
	}
	if ctx.Err() != nil {
		if context.Cause(ctx) == errCallTimeout {
			return nil, err
		}
		return nil, ctx.Err()
	}
	if ue := (*url.Error)(nil); errors.Is(err, ErrNotTheDaemon) && errors.As(err, &ue) {
		return nil, ue.Err
	}
	return nil, c.unreachable(err)
}

// unreachable wraps a transport error: the daemon is not there.
func (c *Client) unreachable(err error) error {
	hint := "start one with `tessera up`, or set --socket / TESSERA_SOCKET"
	if c.base != socketBase {
		hint = "start one with `tessera up --http ADDRESS`, or set --addr / TESSERA_ADDR"
	}
	return fmt.Errorf("%w at %s (%s): %w", ErrUnreachable, c.where, hint, err)
}

// prove runs the proof exchange for req (see package api): it asks the
// server for a challenge, checks that the server proved it holds the
// token for the address this client reached, and returns the
// Authorization header that proves req. The token itself is never sent.
func (c *Client) prove(ctx context.Context, req *http.Request, body []byte) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("challenge nonce: %w", err)
	}
	mine := base64.RawURLEncoding.EncodeToString(raw[:])
	var remote string
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { remote = i.Conn.RemoteAddr().String() }}
	creq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet,
		c.base+api.ChallengePath+"?client="+mine, nil)
	if err != nil {
		return "", fmt.Errorf("build challenge: %w", err)
	}
	resp, err := c.roundTrip(ctx, creq)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	notDaemon := func(why string) error {
		return fmt.Errorf("%w: the server at %s %s, so the token was not sent and nothing was asked of it. "+
			"Either it is not the daemon (another program on that port: the daemon may have stopped and another user's program taken its address; check --addr / %s against the daemon's tessera up --http address), "+
			"or the token (from %s) is not this daemon's (another state folder's, or an old one)",
			ErrNotTheDaemon, c.where, why, "TESSERA_ADDR", c.tokenFrom)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return "", fmt.Errorf("%w at %s: it is shutting down", ErrUnreachable, c.where)
	}
	if resp.StatusCode != http.StatusOK {
		return "", notDaemon(fmt.Sprintf("answered %s to the token challenge (GET %s)", resp.Status, api.ChallengePath))
	}
	var ch api.Challenge
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&ch); err != nil || ch.Nonce == "" {
		if ctx.Err() != nil && context.Cause(ctx) == errCallTimeout {
			return "", err
		}
		return "", notDaemon("sent no valid answer to the token challenge")
	}
	if !api.ProofEqual(ch.Proof, api.DaemonProof(c.token, mine, ch.Nonce, remote)) {
		return "", notDaemon(fmt.Sprintf("could not prove it holds the API token for the address it answered on (%s)", remote))
	}
	proof := api.RequestProof(c.token, ch.Nonce, req.Method, req.URL.RequestURI(), sha256.Sum256(body), remote)
	return api.ProofHeader(ch.Nonce, proof), nil
}

// tokenHint says what to do about a refused token.
func (c *Client) tokenHint() string {
	switch {
	case c.base == socketBase:
		return "Over the socket no token is needed: is this the daemon's socket?"
	case c.token == "":
		return fmt.Sprintf("No token was sent: %s; run as the daemon's user with --state-dir set to its state folder, or set %s", c.tokenFrom, api.TokenEnv)
	}
	return fmt.Sprintf("The token sent (from %s) is not this daemon's", c.tokenFrom)
}

// Submit queues a job. A TESSERA_TOKEN in r.Env is left out: the job
// runs as the daemon's user and can read the token file itself.
func (c *Client) Submit(ctx context.Context, r api.SubmitRequest) (api.Job, error) {
	if slices.ContainsFunc(r.Env, isTokenVar) {
		r.Env = slices.DeleteFunc(slices.Clone(r.Env), isTokenVar)
	}
	var j api.Job
	return j, c.do(ctx, http.MethodPost, "/v1/jobs", r, &j)
}

func isTokenVar(kv string) bool { return strings.HasPrefix(kv, api.TokenEnv+"=") }

// Jobs lists every job, without their environments.
func (c *Client) Jobs(ctx context.Context) ([]api.Job, error) { return c.JobsWithEnv(ctx, false) }

// JobsWithEnv lists every job; with env, the environments of those this
// caller may manage (its own; all for the daemon's user and root).
func (c *Client) JobsWithEnv(ctx context.Context, env bool) ([]api.Job, error) {
	path := "/v1/jobs"
	if env {
		path += "?env=true"
	}
	var js []api.Job
	return js, c.do(ctx, http.MethodGet, path, nil, &js)
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	return j, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &j)
}

// Wait blocks until the job has ended. The daemon sends a heartbeat every
// api.WaitHeartbeat while the job runs: with a timeout (SetTimeout), a
// daemon silent for longer than the timeout (at least three heartbeats)
// is reported as unreachable.
func (c *Client) Wait(ctx context.Context, id string) (api.Job, error) {
	path := "/v1/jobs/" + url.PathEscape(id) + "/wait"
	ctx, _, body, done, err := c.stream(ctx, http.MethodGet, path, max(c.timeout, 3*api.WaitHeartbeat))
	if err != nil {
		return api.Job{}, err
	}
	defer done()
	var j api.Job
	if err := json.NewDecoder(body).Decode(&j); err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != errCallTimeout {
			return api.Job{}, ctx.Err()
		}
		// The daemon stopped (or froze) while the job ran.
		return api.Job{}, c.timedOut(ctx, http.MethodGet, path, fmt.Errorf("%w at %s: the answer to GET %s was cut: %w", ErrUnreachable, c.where, path, err))
	}
	return j, nil
}

// stream sends a call whose answer may take long to end. The client's
// timeout bounds the wait for the answer to begin; idle, when above 0 and
// with a timeout set, bounds each gap between bytes of the body after
// that. done releases the call.
func (c *Client) stream(ctx context.Context, method, path string, idle time.Duration) (context.Context, *http.Response, io.Reader, func(), error) {
	ctx, cancel := context.WithCancelCause(ctx)
	var timer *time.Timer
	if c.timeout > 0 {
		timer = time.AfterFunc(c.timeout, func() { cancel(errCallTimeout) })
	}
	stop := func() {
		if timer != nil {
			timer.Stop()
		}
		cancel(nil)
	}
	resp, err := c.send(ctx, method, path, nil)
	if err != nil {
		stop()
		return ctx, nil, nil, nil, c.timedOut(ctx, method, path, err)
	}
	done := func() {
		stop()
		_ = resp.Body.Close()
	}
	if timer == nil {
		return ctx, resp, resp.Body, done, nil
	}
	if idle <= 0 {
		timer.Stop()
		return ctx, resp, resp.Body, done, nil
	}
	timer.Reset(idle)
	return ctx, resp, readFunc(func(p []byte) (int, error) {
		n, err := resp.Body.Read(p)
		if n > 0 {
			timer.Reset(idle)
		}
		return n, err
	}), done, nil
}

// readFunc is an io.Reader made of a function.
type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

// Stop stops a job.
func (c *Client) Stop(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	return j, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/stop", nil, &j)
}

// Queue lists the waiting jobs in start order.
func (c *Client) Queue(ctx context.Context) ([]api.QueueEntry, error) {
	var q []api.QueueEntry
	return q, c.do(ctx, http.MethodGet, "/v1/queue", nil, &q)
}

// Queues returns every queue with its usage.
func (c *Client) Queues(ctx context.Context) ([]api.QueueStatus, error) {
	var q []api.QueueStatus
	return q, c.do(ctx, http.MethodGet, "/v1/queues", nil, &q)
}

// Status returns the GPU bookings.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var s api.Status
	return s, c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
}

// Snapshot returns what the web dashboard shows (GET /ui/api/snapshot):
// the daemon's GPUs with the shares on them, its queues, the waiting jobs
// with why each waits, every job, and the totals, built by the daemon
// from the same queries as Status, Jobs, Queue and Queues. tessera top
// draws it. It needs no token.
func (c *Client) Snapshot(ctx context.Context) (webui.Snapshot, error) {
	var s webui.Snapshot
	return s, c.do(ctx, http.MethodGet, "/ui/api/snapshot", nil, &s)
}

// Logs copies a job's stdout or stderr from byte offset to w and returns
// how many bytes it copied; with follow it returns once the job has ended
// and all its output is copied. A stream cut short (the daemon restarted)
// returns an error wrapping ErrUnreachable: call again at offset+n.
func (c *Client) Logs(ctx context.Context, id, stream string, follow bool, offset int64, w io.Writer) (int64, error) {
	q := url.Values{"stream": {stream}, "follow": {fmt.Sprint(follow)}, "offset": {fmt.Sprint(offset)}}
	path := "/v1/jobs/" + url.PathEscape(id) + "/logs?" + q.Encode()
	// A followed job may print nothing for hours: only the start of the
	// answer is timed.
	ctx, resp, body, done, err := c.stream(ctx, http.MethodGet, path, 0)
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := io.Copy(w, body)
	if err == nil && resp.Trailer.Get(api.LogCompleteTrailer) != "true" {
		err = errors.New("stream ended early")
	}
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != errCallTimeout {
			return n, ctx.Err()
		}
		return n, c.timedOut(ctx, http.MethodGet, path, fmt.Errorf("read %s of %s: %w: %w", stream, id, ErrUnreachable, err))
	}
	return n, nil
}
