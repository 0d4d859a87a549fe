package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSchedulerProfiling: --profiling-addr serves net/http/pprof while the
// scheduler runs (here it waits for an API server that never answers), and
// an address that cannot be listened on is an error naming the flag.
func TestSchedulerProfiling(t *testing.T) {
	_, errOut, code := run(t, "scheduler", "--kubeconfig", writeKubeconfig(t), "--metrics-addr", "", "--profiling-addr", "256.0.0.1:1")
	if code == 0 || !strings.Contains(errOut, "--profiling-addr 256.0.0.1:1") {
		t.Errorf("bad --profiling-addr: exit %d, stderr %q; want non-zero and the flag named", code, errOut)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var out, errb bytes.Buffer
		done <- Execute(ctx, []string{"scheduler", "--kubeconfig", writeKubeconfig(t), "--metrics-addr", "", "--leader-elect=false", "--profiling-addr", addr}, &out, &errb)
	}()
	defer func() { cancel(); <-done }()
	var body string
	deadline := time.Now().Add(30 * time.Second) // liveness bound, not a performance one
	for time.Now().Before(deadline) {
		if body, err = httpGet("http://" + addr + "/debug/pprof/"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("profiling server: %v", err)
	}
	for _, want := range []string{"allocs", "heap", "profile", "goroutine"} {
		if !strings.Contains(body, want) {
			t.Errorf("/debug/pprof/ index lacks %q", want)
		}
	}
	if _, err := httpGet("http://" + addr + "/debug/pprof/heap"); err != nil {
		t.Errorf("heap profile: %v", err)
	}
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), nil
}
