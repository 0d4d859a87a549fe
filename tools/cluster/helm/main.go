// Command helm is Helm's command line, built from the pinned module
// helm.sh/helm/v4 for Tessera's chart tests and `make manifests`. It lives
// in tools/cluster with the other programs the tests run (see that module's
// doc.go).
package main

import (
	"errors"
	"fmt"
	"os"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

func main() {
	// The field manager the API server records; the same as Helm's own CLI.
	kube.ManagedFieldsManager = "helm"
	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	if err := cmd.Execute(); err != nil {
		var cerr helmcmd.CommandError
		if errors.As(err, &cerr) {
			os.Exit(cerr.ExitCode)
		}
		os.Exit(1)
	}
}
