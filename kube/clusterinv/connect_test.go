package clusterinv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubeconfig writes a kubeconfig with one context per name (server
// https://NAME.example) and returns its path.
func kubeconfig(t *testing.T, current string, names ...string) string {
	t.Helper()
	var clusters, users, contexts string
	for _, n := range names {
		clusters += fmt.Sprintf("- name: %s\n  cluster:\n    server: https://%s.example\n", n, n)
		users += fmt.Sprintf("- name: %s\n  user:\n    token: t-%s\n", n, n)
		contexts += fmt.Sprintf("- name: %s\n  context:\n    cluster: %s\n    user: %s\n", n, n, n)
	}
	body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n%susers:\n%scontexts:\n%scurrent-context: %q\n", clusters, users, contexts, current)
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConnect(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // never in-cluster here
	one := kubeconfig(t, "alpha", "alpha", "beta")
	two := kubeconfig(t, "gamma", "gamma")
	none := kubeconfig(t, "", "alpha", "beta")
	missing := filepath.Join(t.TempDir(), "missing")
	list := strings.Join([]string{missing, two, one}, string(os.PathListSeparator))
	tests := []struct {
		name       string
		env        string
		opt        Options
		ctx, host  string
		err        string
		noKubeconf bool
	}{
		{name: "explicit file", opt: Options{Kubeconfig: one}, ctx: "alpha", host: "https://alpha.example"},
		{name: "explicit file and context", opt: Options{Kubeconfig: one, Context: "beta"}, ctx: "beta", host: "https://beta.example"},
		// The first file that sets current-context wins; contexts of every file are known.
		{name: "KUBECONFIG merged", env: list, ctx: "gamma", host: "https://gamma.example"},
		{name: "KUBECONFIG merged, context of the second file", env: list, opt: Options{Context: "beta"}, ctx: "beta", host: "https://beta.example"},
		{name: "flag beats KUBECONFIG", env: two, opt: Options{Kubeconfig: one}, ctx: "alpha", host: "https://alpha.example"},
		{name: "unknown context", opt: Options{Kubeconfig: one, Context: "prod"}, err: `--context "prod": no such context in --kubeconfig ` + one + `; available: alpha, beta`},
		{name: "unknown context, merged", env: list, opt: Options{Context: "prod"}, err: "available: alpha, beta, gamma"},
		{name: "no current context", opt: Options{Kubeconfig: none}, err: "sets no current-context: choose one with --context (available: alpha, beta)"},
		{name: "missing explicit file", opt: Options{Kubeconfig: missing}, err: "--kubeconfig " + missing + ": stat"},
		{name: "no kubeconfig", env: missing, err: "no kubeconfig found (looked at $KUBECONFIG=" + missing + ": none of its files exists", noKubeconf: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			if tc.env == "" {
				os.Unsetenv("KUBECONFIG")
			}
			c, err := Connect(tc.opt)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Errorf("err %T is not a *ConfigError", err)
				}
				if errors.Is(err, ErrNoKubeconfig) != tc.noKubeconf {
					t.Errorf("errors.Is(err, ErrNoKubeconfig) = %v", !tc.noKubeconf)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Context != tc.ctx || c.Server != tc.host || c.Config.BearerToken != "t-"+tc.ctx {
				t.Errorf("got context %q server %q token %q; want %q %q", c.Context, c.Server, c.Config.BearerToken, tc.ctx, tc.host)
			}
		})
	}
}
