package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/client"
)

// serve starts a daemon (whose "supervisor" runs nothing, so jobs end as
// lost) behind the API on a unix socket.
func serve(t *testing.T) (*client.Client, string) {
	t.Helper()
	cat := catalog.Default()
	src, _ := discovery.Open("sim:2xH200", cat)
	nodes, err := src.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	d, err := hostd.New(hostd.Config{StateDir: dir, Source: src.Name(), Simulated: true, Nodes: nodes, Catalog: cat, Supervisor: []string{"/bin/true"}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(d, Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	ln, err := ListenUnix(sock, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnContext: ConnContext}
	go func() { _ = srv.Serve(ln) }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() {
		_ = srv.Close()
		cancel()
		<-done
		_ = d.Close()
	})
	return client.New(sock), sock
}

func TestAPI(t *testing.T) {
	c, sock := serve(t)
	ctx := context.Background()
	_, err := c.Submit(ctx, api.SubmitRequest{GPU: map[string]string{"compute": "2"}, Command: []string{"/bin/true"}})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Field != "compute" {
		t.Fatalf("bad submit: %v", err)
	}
	if _, err := c.Job(ctx, "job-1"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("unknown job: %v", err)
	}
	j, err := c.Submit(ctx, api.SubmitRequest{GPU: map[string]string{"compute": "0.5"}, Command: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = c.Wait(ctx, j.ID); err != nil || j.State != api.Lost {
		t.Fatalf("job under a supervisor that records nothing: %+v, %v", j, err)
	}
	if _, err := c.Stop(ctx, j.ID); !errors.As(err, &ae) || ae.Status != 409 {
		t.Errorf("stop finished job: %v", err)
	}
	if _, err := ListenUnix(sock, 0o600); err == nil || !strings.Contains(err.Error(), "another tessera daemon") {
		t.Errorf("second listener on a live socket: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	for path, code := range map[string]int{
		"/v1/jobs/" + j.ID + "/logs?offset=-1":    400,
		"/v1/jobs/" + j.ID + "/logs?stream=video": 400,
		"/v1/jobs/job-404/logs":                   404,
		"/v1/jobs/" + j.ID + "/logs?follow=true":  200,
	} {
		resp, err := hc.Get("http://x" + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, code)
		}
		if code == 200 && resp.Trailer.Get(api.LogCompleteTrailer) != "true" {
			t.Errorf("GET %s: no completion trailer", path)
		}
	}
	for path, want := range map[string]string{
		"/metrics": `tessera_host_jobs{state="lost"} 1`,
		"/":        "sim:2xH200 (simulated)",
	} {
		resp, err := hc.Get("http://x" + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("%s lacks %q:\n%s", path, want, body)
		}
	}
}
