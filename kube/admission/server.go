package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// CertFile and KeyFile are the PEM serving certificate (with any
	// intermediates) and its key. They are read again when either file
	// changes, so a rotated Secret takes effect without a restart.
	CertFile, KeyFile string
	// Handler answers POST /mutate: a *Handler, possibly wrapped.
	Handler http.Handler
	Log     *slog.Logger
}

// Server serves the webhook over HTTPS: POST /mutate (AdmissionReview v1)
// and GET /healthz.
type Server struct {
	cfg   ServerConfig
	certs *certReloader
}

// NewServer loads the certificate (failing early on unreadable or
// mismatched files) and returns a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("admission server: handler must be set")
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("admission server: certificate and key files must be set")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cr := &certReloader{certFile: cfg.CertFile, keyFile: cfg.KeyFile, log: cfg.Log}
	if _, err := cr.get(nil); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, certs: cr}, nil
}

// Serve answers on ln until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/mutate", s.cfg.Handler)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.get},
		ErrorLog:          slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.cfg.Log.Info("serving admission webhook", "addr", ln.Addr().String())
	err := srv.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return fmt.Errorf("admission webhook server: %w", err)
}

// certReloader returns the serving certificate, reading the files again
// when their size or modification time changes.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp string
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	stamp, err := fileStamp(c.certFile, c.keyFile)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && stamp == c.stamp && c.cert != nil {
		return c.cert, nil
	}
	if err == nil {
		var cert tls.Certificate
		if cert, err = tls.LoadX509KeyPair(c.certFile, c.keyFile); err == nil {
			if c.cert != nil {
				c.log.Info("reloaded the webhook serving certificate", "cert", c.certFile)
			}
			c.cert, c.stamp = &cert, stamp
			return c.cert, nil
		}
	}
	err = fmt.Errorf("load webhook certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	if c.cert != nil {
		// Mid-rotation (one file written, not the other): keep serving the
		// previous pair and try again at the next handshake.
		c.log.Warn("keeping the previous webhook certificate", "error", err)
		return c.cert, nil
	}
	return nil, err
}

func fileStamp(paths ...string) (string, error) {
	var s string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}
