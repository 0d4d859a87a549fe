package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Tessera's version and build information",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			version, revision := "(devel)", ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				if bi.Main.Version != "" {
					version = bi.Main.Version
				}
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						revision = s.Value
					}
				}
			}
			fmt.Fprintf(a.stdout, "tessera %s %s %s/%s %s\n", version, revision, runtime.GOOS, runtime.GOARCH, runtime.Version())
			return nil
		},
	}
}
