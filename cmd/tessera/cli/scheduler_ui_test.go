package cli

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tessera-gpu/tessera/kube/clusterview"
	"github.com/tessera-gpu/tessera/webui"
)

// noView is a scheduler that has not finished a cycle.
type noView struct{}

func (noView) View() (clusterview.View, bool) { return clusterview.View{}, false }
func (noView) ViewChanged() <-chan struct{}   { return nil }

// TestSchedulerDashboardRoutes: the scheduler's metrics server serves the
// dashboard next to /metrics, read-only (another method than GET is
// refused) with the page's security headers; before the first cycle the
// snapshot is 503 saying why; with --dashboard=false only /metrics is
// served.
func TestSchedulerDashboardRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	ui := webui.New(clusterview.Source{Viewer: noView{}}, webui.Options{Scope: "cluster", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	on := httptest.NewServer(metricsMux(reg, ui))
	defer on.Close()
	off := httptest.NewServer(metricsMux(reg, nil))
	defer off.Close()
	do := func(method, url string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, body := do("GET", on.URL+"/")
	if resp.StatusCode != 200 || !strings.Contains(body, `data-scope="cluster"`) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GET /: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	if !strings.Contains(body, "not finished a scheduling cycle") {
		t.Errorf("the page's summary does not say there is no view yet:\n%s", body)
	}
	if resp, body := do("GET", on.URL+"/ui/api/snapshot"); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "not the leader") {
		t.Errorf("snapshot before the first cycle: %d %s, want 503 saying why", resp.StatusCode, body)
	}
	if resp, _ := do("POST", on.URL+"/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", resp.StatusCode)
	}
	for _, srv := range []*httptest.Server{on, off} {
		if resp, _ := do("GET", srv.URL+"/metrics"); resp.StatusCode != 200 {
			t.Errorf("GET /metrics: %d", resp.StatusCode)
		}
	}
	if resp, _ := do("GET", off.URL+"/"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / with the dashboard off: %d, want 404", resp.StatusCode)
	}
}
