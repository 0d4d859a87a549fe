// Command build-tools builds every program of the tools modules that the
// binary cache lacks (test/toolbin.BuildAll) and says how long each module
// took. `make unit` starts it beside `go test`, so that on a cold machine
// the Kubernetes, containerd and Kueue builds run while tests wait on their
// control planes; run from the repository (it finds the tools modules
// there). Exit status 1 and the build's output when a build fails.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-gpu/tessera/test/toolbin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	last := start
	err := toolbin.BuildAll(ctx, func(module string, names []string) {
		now := time.Now()
		fmt.Printf("%s: %s ready (%s)\n", module, strings.Join(names, ", "), now.Sub(last).Round(time.Second))
		last = now
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "build-tools: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("all tools ready in %s\n", time.Since(start).Round(time.Second))
}
