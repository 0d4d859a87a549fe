package cli

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/agent/libinstall"
)

// imageLibPath is where the Tessera image holds the library (make image).
const imageLibPath = "/usr/local/lib/tessera/" + libinstall.File

func newInstallLibCommand(a *app) *cobra.Command {
	var o libinstall.Options
	cmd := &cobra.Command{
		Use:   "install-lib --to DIR",
		Short: "Install the CUDA interception library into a node folder (the agent's init container runs it)",
		Long: `Install the CUDA interception library on a node, for the agent to bind-mount
into containers (its --intercept-library names DIR/` + libinstall.File + `).

The library is copied to DIR/<version>-<first 12 hex digits of its sha256>/` + libinstall.File + `
(a temporary file, synced, renamed into place), then the stable symlink
DIR/` + libinstall.File + ` is switched to it atomically (a new symlink renamed over
the old one), so a reader never finds the path missing. Running it again with
the same library changes nothing. The newest --keep versioned folders are
kept, never removing the one the symlink names; containers that run an
older version keep their bind-mounted file even after its folder goes.

The Tessera image has no shell: this is what its init container runs.`,
		Example: `  tessera install-lib --from /usr/local/lib/tessera/` + libinstall.File + ` --to /var/lib/tessera/lib`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			o.Version = resolveBuildInfo(version, commit, buildDate, bi).Version
			msg, err := libinstall.Install(o)
			var le *libinstall.Error
			switch {
			case errors.As(err, &le) && le.Input:
				return usageError("--%s", le.Error())
			case errors.As(err, &le):
				return fmt.Errorf("--%s", le.Error())
			case err != nil:
				return err
			}
			_, err = fmt.Fprintln(a.stdout, msg)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.From, "from", imageLibPath, "the library to install")
	f.StringVar(&o.To, "to", "", "node folder to install into, e.g. /var/lib/tessera/lib (required)")
	f.IntVar(&o.Keep, "keep", 3, "versioned folders to keep, the current one included")
	setRange(cmd, "keep", fmt.Sprintf("in [1, %d]", libinstall.MaxKeep))
	return cmd
}
