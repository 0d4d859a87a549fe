package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/api"
)

// FuzzSubmit posts arbitrary bodies to POST /v1/jobs through the real
// handler (guard included), as the daemon's user on its socket, on a
// daemon of simulated GPUs whose supervisor is /bin/true. The daemon's
// loop is not run, so an accepted job is only queued. Bad input must be a
// 4xx with an error message, never a panic nor a 500; an accepted job
// must be the one asked for.
func FuzzSubmit(f *testing.F) {
	for _, seed := range []string{
		submitBody,
		`{"gpu":{"compute":"0.25","memory":"20Gi","count":"2"},"command":["/bin/true","a"],"env":["A=b"],"dir":"/","queue":"research","priority":5,"restartable":true}`,
		`{"gpu":{"mig-profile":"1g.18gb"},"command":["/bin/true"]}`,
		`{"gpu":{"compute":"0"},"command":["/bin/true"]}`,
		`{"gpu":{"compute":"1","compute-limit":"0.5"},"command":["true"]}`,
		`{"gpu":{"model":"H200|A100"},"command":["/bin/true"],"priority":1001}`,
		`{"gpu":{},"command":[],"queue":"Not A Label"}`,
		`{"gpu":{"count":"99"},"command":["/bin/true"],"interceptLib":"relative.so"}`,
		`{"command":["/bin/true"],"owner":0}`,
		`{"gpu":null,"command":null}`,
		`{} {}`,
		`[]`, `null`, `"x"`, ``, `{`, `{"gpu":{"compute":1}}`,
	} {
		f.Add([]byte(seed))
	}
	cat := catalog.Default()
	src, err := discovery.Open("sim:2xH200", cat)
	if err != nil {
		f.Fatal(err)
	}
	nodes, err := src.Discover(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := hostd.New(hostd.Config{StateDir: f.TempDir(), Source: src.Name(), Simulated: true, Nodes: nodes, Catalog: cat, Supervisor: []string{"/bin/true"}, Log: log})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = d.Close() })
	h, err := Handler(d, Options{Log: log})
	if err != nil {
		f.Fatal(err)
	}
	uid := uint32(os.Getuid())
	ctx := context.WithValue(context.Background(), connKey{}, conn{unix: true, peer: uid, peerKnown: true})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusCreated:
			var j api.Job
			if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
				t.Fatalf("201 with a body that is no job: %q: %v", rec.Body, err)
			}
			var r api.SubmitRequest
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatalf("accepted %q, which does not decode: %v", body, err)
			}
			if j.State != api.Queued || j.OwnerUID == nil || *j.OwnerUID != uid || len(j.Command) == 0 || j.Command[0] != r.Command[0] {
				t.Fatalf("accepted %q as %+v", body, j)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var e api.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%d without an error message for %q: %q", rec.Code, body, rec.Body)
			}
		default:
			t.Fatalf("POST /v1/jobs %q answered %d %s", body, rec.Code, rec.Body)
		}
	})
}
