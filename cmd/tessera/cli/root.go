package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/hostd/client"
	"github.com/tessera-gpu/tessera/internal/termsafe"
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
				fmt.Fprintln(stderr, "Error:", termsafe.Lines(ee.msg))
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "Error:", safeMessage(err))
		return 1
	}
	return 0
}

// safeMessage is err's message made safe for a terminal: the daemon's
// messages in it (client.APIError, whatever the daemon or a program
// listening at --addr answered) are escaped whole, newlines included, so
// they cannot forge lines; the rest keeps its line breaks, with every
// other control character escaped (termsafe).
func safeMessage(err error) string {
	msg := err.Error()
	for _, m := range daemonMessages(err) {
		if s := termsafe.String(m); s != m {
			msg = strings.ReplaceAll(msg, m, s)
		}
	}
	return termsafe.Lines(msg)
}

// daemonMessages are the messages of the client.APIErrors in err's tree.
func daemonMessages(err error) []string {
	var ms []string
	if ae, ok := err.(*client.APIError); ok && ae.Msg != "" {
		ms = append(ms, ae.Msg)
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			ms = append(ms, daemonMessages(e)...)
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			ms = append(ms, daemonMessages(e)...)
		}
	}
	return ms
}

// exitError ends a command with a given exit code. Strings from the
// daemon in msg must be escaped already (termsafe.String): Execute only
// escapes what a terminal would act on and keeps msg's line breaks.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// exitUsage is the exit code of every usage error: a bad flag value, a
// missing or unexpected argument, an unknown command or flag, input the
// host daemon refuses.
const exitUsage = 2

// usageError is a usage error (exit 2) with a formatted message.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// asUsage makes err a usage error (exit 2), keeping its message (the
// daemon's part escaped, see safeMessage).
func asUsage(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitUsage, msg: safeMessage(err)}
}

// rangeAnnotation is the flag annotation holding a flag's allowed range
// ("in [-1000, 1000]"), quoted when a value does not parse.
const rangeAnnotation = "tessera/range"

// setRange records the allowed range of a flag for flagUsageError (the
// tests of each command's bad values check it is there).
func setRange(cmd *cobra.Command, flag, allowed string) {
	_ = cmd.Flags().SetAnnotation(flag, rangeAnnotation, []string{allowed})
}

// flagUsageError restates a flag parsing error (pflag's, which quotes
// strconv and time errors) as a usage error naming the flag, the value
// and what the flag takes.
func flagUsageError(cmd *cobra.Command, err error) error {
	var (
		invalid  *pflag.InvalidValueError
		required *pflag.ValueRequiredError
	)
	switch {
	case errors.As(err, &invalid):
		return usageError("%s: must be %s, got %q", flagName(invalid.GetFlag()), flagKind(invalid.GetFlag()), invalid.GetValue())
	case errors.As(err, &required):
		return usageError("%s: needs a value: %s", flagName(required.GetFlag()), flagKind(required.GetFlag()))
	}
	return usageError("%v (see %s --help)", err, cmd.CommandPath())
}

// flagName is how a flag is written: "--gpus", "-d/--detach".
func flagName(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + "/--" + f.Name
	}
	return "--" + f.Name
}

// flagKind says what a flag takes, from its type and recorded range.
func flagKind(f *pflag.Flag) string {
	var kind string
	switch t := f.Value.Type(); t {
	case "int", "int8", "int16", "int32", "int64":
		kind = "a whole number"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		kind = "a whole number >= 0"
	case "float32", "float64":
		kind = "a number"
	case "duration":
		kind = "a duration such as 90s, 5m or 1h30m"
	case "bool":
		kind = "true or false"
	default:
		kind = "a " + t
	}
	if r := f.Annotations[rangeAnnotation]; len(r) > 0 {
		kind += " " + r[0]
	}
	return kind
}

// usageArgs makes the argument errors of cmd and its subcommands usage
// errors that say what was wrong and show the usage line. Validators that
// already return an *exitError keep it.
func usageArgs(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		usageArgs(c)
	}
	orig := cmd.Args
	if orig == nil {
		return
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		err := orig(c, args)
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		if c.HasSubCommands() && len(args) > 0 {
			return unknownCommand(c, args[0])
		}
		for k := range args { // the first argument beyond what the command takes
			if orig(c, args[:k]) == nil && orig(c, args[:k+1]) != nil {
				return usageError("unexpected argument %q (usage: %s)", args[k], c.UseLine())
			}
		}
		return usageError("missing arguments (usage: %s)", c.UseLine())
	}
}

func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError("%s (see %s --help)", msg, c.CommandPath())
}

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
		// Runnable with no arguments (it prints its help), so that an
		// unknown command is a usage error rather than cobra's plain one.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
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
		newTopCommand(a),
		newWebhookCommand(a),
		newInstallLibCommand(a),
		newMigrateCommand(a),
	)
	root.SetFlagErrorFunc(flagUsageError)
	usageArgs(root)
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
		return usageError("--log-level: must be one of debug, info, warn, error; got %q", a.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.logFormat {
	case "text":
		a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
	default:
		return usageError("--log-format: must be text or json; got %q", a.logFormat)
	}
	return nil
}
