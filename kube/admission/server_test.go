package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// serve starts srv on a loopback port and returns its address; the server
// stops when the test ends.
func serve(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func tlsClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true,
	}}
}

func TestServerServesReviewsOverTLSAndReloadsTheCertificate(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.issue(t, dir, "first")
	srv, err := NewServer(ServerConfig{CertFile: certFile, KeyFile: keyFile, Handler: newHandler(t)})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	client := tlsClient(ca.PEM)

	resp, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS.PeerCertificates[0].Subject.CommonName != "first" {
		t.Fatalf("healthz: %d from %q", resp.StatusCode, resp.TLS.PeerCertificates[0].Subject.CommonName)
	}

	raw, _ := json.Marshal(testPod(map[string]string{"gpu-fraction": "0.25"}))
	body, _ := json.Marshal(admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
		UID: "u", Kind: podKind, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
	resp, err = client.Post("https://"+addr+"/mutate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil || !out.Response.Allowed || !strings.Contains(string(out.Response.Patch), "tessera.io/gpu") {
		t.Fatalf("mutate over TLS: %s (%v)", data, err)
	}

	// A rotated Secret: the next handshake presents the new certificate.
	time.Sleep(10 * time.Millisecond) // a distinct modification time
	ca.issue(t, dir, "second")
	resp, err = client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != "second" {
		t.Errorf("after rotation the server presents %q, want the new certificate", cn)
	}

	// A half-written rotation keeps the last good pair.
	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err = client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("with a broken certificate file the previous pair must still serve: %v", err)
	}
	resp.Body.Close()
	if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != "second" {
		t.Errorf("with a broken file the server presents %q, want the last good certificate", cn)
	}
}

func TestNewServerChecksTheCertificate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHandler(t)
	tests := []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Handler: h}, "certificate and key files must be set"},
		{ServerConfig{CertFile: filepath.Join(dir, "missing.crt"), KeyFile: bad, Handler: h}, "missing.crt"},
		{ServerConfig{CertFile: bad, KeyFile: bad, Handler: h}, "load webhook certificate"},
		{ServerConfig{CertFile: bad, KeyFile: bad}, "handler must be set"},
	}
	for _, tc := range tests {
		if _, err := NewServer(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
