// Command tessera is Tessera's single binary: show-gpus, the trace
// simulator and, as they land, the scheduler, the node agent and the host daemon.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tessera-gpu/tessera/cmd/tessera/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
