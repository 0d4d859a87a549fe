package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/hostd/api"
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
}

// New returns a client for the daemon serving socket. The socket needs no
// token: its file mode says who may connect, and the daemon knows the
// peer's uid.
func New(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
	return &Client{base: "http://tessera", where: socket, hc: &http.Client{Transport: tr}}
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

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(data)
	}
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode daemon answer to %s %s: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		hint := "start one with `tessera up`, or set --socket / TESSERA_SOCKET"
		if c.base != "http://tessera" {
			hint = "start one with `tessera up --http ADDRESS`, or set --addr / TESSERA_ADDR"
		}
		return nil, fmt.Errorf("%w at %s (%s): %w", ErrUnreachable, c.where, hint, err)
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

// tokenHint says what to do about a refused token.
func (c *Client) tokenHint() string {
	switch {
	case c.base == "http://tessera":
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

// Jobs lists every job.
func (c *Client) Jobs(ctx context.Context) ([]api.Job, error) {
	var js []api.Job
	return js, c.do(ctx, http.MethodGet, "/v1/jobs", nil, &js)
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	return j, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &j)
}

// Wait blocks until the job has ended.
func (c *Client) Wait(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	return j, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/wait", nil, &j)
}

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
	resp, err := c.send(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.Trailer.Get(api.LogCompleteTrailer) != "true" {
		err = errors.New("stream ended early")
	}
	if err != nil {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		return n, fmt.Errorf("read %s of %s: %w: %w", stream, id, ErrUnreachable, err)
	}
	return n, nil
}
