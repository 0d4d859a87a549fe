package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/test/testcluster"
)

func TestWebhookFlagErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"webhook"}, "--tls-cert-file and --tls-key-file must be set"},
		{[]string{"webhook", "--tls-cert-file", bad, "--tls-key-file", bad, "--port", "0"}, "--port must be in [1, 65535], got 0"},
		{[]string{"webhook", "--tls-cert-file", bad, "--tls-key-file", bad, "--scheduler-name", ""}, "--scheduler-name: admission: scheduler name must be set"},
		{[]string{"webhook", "--tls-cert-file", bad, "--tls-key-file", bad}, "--tls-cert-file/--tls-key-file: load webhook certificate"},
	}
	for _, tc := range tests {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestWebhookServesUntilCancelled(t *testing.T) {
	certFile, keyFile := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	codec := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		codec <- Execute(ctx, []string{"webhook", "--tls-cert-file", certFile, "--tls-key-file", keyFile,
			"--bind-address", "127.0.0.1", "--port", fmt.Sprint(port)}, &bytes.Buffer{}, &errb)
	}()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("healthz: HTTP %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-codec:
		if code != 0 {
			t.Errorf("exit %d after cancel, want 0; stderr %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("webhook did not stop when its context ended")
	}
}

// selfSigned is a serving certificate for 127.0.0.1 (testcluster.SelfSigned).
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, _, err := testcluster.SelfSigned(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
