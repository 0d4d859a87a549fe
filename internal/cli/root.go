package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/catalog"
)

// app carries what every command needs; it replaces package-level state.
type app struct {
	stdout, stderr io.Writer
	catalog        *catalog.Catalog
	logLevel       string
	logFormat      string
	log            *slog.Logger
}

// Execute runs the tessera command line with args (without the program
// name) and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, "Error:", ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	return 0
}

// exitError ends a command with a given exit code.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr, catalog: catalog.Default()}
	root := &cobra.Command{
		Use:   "tessera",
		Short: "Share GPUs safely: fractions with burst, isolation, and fraction-aware scheduling",
		Long: `Tessera shares GPUs between workloads: a guaranteed fraction of a GPU with a
burst limit, memory caps enforced on the node, and fraction-aware placement on
one host or across a Kubernetes cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setupLogging()
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "text", "log format: text or json")
	root.AddCommand(
		newAgentCommand(a),
		newShowGPUsCommand(a),
		newSchedulerCommand(a),
		newVersionCommand(a),
		newSimCommand(a),
		newUpCommand(a),
		newSuperviseCommand(a),
		newRunCommand(a),
		newPsCommand(a),
		newLogsCommand(a),
		newStopCommand(a),
		newQueueCommand(a),
		newWebhookCommand(a),
	)
	return root
}

func (a *app) setupLogging() error {
	var level slog.Level
	switch strings.ToLower(a.logLevel) {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return fmt.Errorf("--log-level: must be one of debug, info, warn, error; got %q", a.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.logFormat {
	case "text":
		a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
	default:
		return fmt.Errorf("--log-format: must be text or json; got %q", a.logFormat)
	}
	return nil
}
