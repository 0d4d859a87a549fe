package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at link time by the Makefile's build (go build -ldflags "-X
// github.com/tessera-gpu/tessera/cmd/tessera/cli.version=..."); empty in a
// plain `go build`, which falls back to the build information Go records. The
// linker can only set package-level strings: these are written once, before
// main runs, and only read afterwards.
var (
	version   string
	commit    string
	buildDate string
)

// buildInfo is what `tessera version` reports.
type buildInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Date is when the binary was built (DateKind "built") or, for a plain
	// go build, when its commit was made (DateKind "committed").
	Date     string `json:"date"`
	DateKind string `json:"dateKind"`
	// Modified says the build had uncommitted changes (plain go build
	// only; the Makefile puts "-dirty" on the commit instead).
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// resolveBuildInfo prefers the values the Makefile links in and falls back,
// field by field, to Go's build information: the main module's version and
// the vcs.revision, vcs.time and vcs.modified settings that go build records
// in a git checkout (unless -buildvcs=false).
func resolveBuildInfo(ldVersion, ldCommit, ldDate string, bi *debug.BuildInfo) buildInfo {
	out := buildInfo{Version: ldVersion, Commit: ldCommit, Date: ldDate, DateKind: "built", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	var vcsRevision, vcsTime string
	if bi != nil {
		if out.Version == "" && bi.Main.Version != "(devel)" {
			out.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRevision = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				out.Modified = ldCommit == "" && s.Value == "true"
			}
		}
	}
	if out.Commit == "" {
		out.Commit = vcsRevision
	}
	if out.Date == "" && vcsTime != "" {
		out.Date, out.DateKind = vcsTime, "committed"
	}
	if out.Version == "" {
		out.Version = "devel"
	}
	if out.Commit == "" {
		out.Commit = "unknown"
	}
	if out.Date == "" {
		out.Date, out.DateKind = "unknown", "built"
	}
	return out
}

func newVersionCommand(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print Tessera's version, commit and build date",
		Long: `Print Tessera's version, the commit it was built from and when it was built.
"make build" links these in; a plain "go build" in a git checkout reports the
commit and its time from Go's build information instead, and "devel" as the
version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			bi, _ := debug.ReadBuildInfo()
			info := resolveBuildInfo(version, commit, buildDate, bi)
			if output != formatTable {
				return writeStructured(a.stdout, output, info)
			}
			c := info.Commit
			if info.Modified {
				c += " (with uncommitted changes)"
			}
			_, err := fmt.Fprintf(a.stdout, "tessera %s\ncommit:  %s\n%-8s %s\ngo:      %s %s\n", info.Version, c, info.DateKind+":", info.Date, info.GoVersion, info.Platform)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	return cmd
}
