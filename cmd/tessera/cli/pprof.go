package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/spf13/cobra"
)

// withProfiling adds --profiling-addr to cmd: when set, Go's runtime
// profiles (net/http/pprof: /debug/pprof/profile for CPU, /allocs, /heap,
// /goroutine, ...) are served there while the command runs. It is off by
// default; the profiles reveal the program's internals, so bind it to a
// loopback address.
func withProfiling(cmd *cobra.Command, a *app) *cobra.Command {
	var addr string
	cmd.Flags().StringVar(&addr, "profiling-addr", "", `address of a net/http/pprof server (/debug/pprof/...), e.g. 127.0.0.1:6060; "" disables it`)
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if addr == "" {
			return run(c, args)
		}
		stop, err := serveProfiling(c.Context(), a, addr)
		if err != nil {
			return err
		}
		defer stop()
		return run(c, args)
	}
	return cmd
}

// serveProfiling serves net/http/pprof's handlers on addr until stop.
func serveProfiling(ctx context.Context, a *app, addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--profiling-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also the named profiles: heap, allocs, goroutine, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No write timeout: a CPU profile or trace streams for as long as asked.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("profiling server stopped", "err", err)
		}
	}()
	a.log.Info("serving profiles", "addr", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
