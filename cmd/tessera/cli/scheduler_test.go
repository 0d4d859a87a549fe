package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSchedulerFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"scheduler", "--kubeconfig", "/does/not/exist"}, "--kubeconfig:"},
		{[]string{"scheduler", "--kubeconfig", "/does/not/exist", "extra"}, `unexpected argument "extra" (usage: tessera scheduler [flags])`},
		{[]string{"scheduler", "--seed", "-1"}, `--seed: must be a whole number >= 0, got "-1"`},
		{[]string{"scheduler", "--kubeconfig", writeKubeconfig(t), "--kube-api-qps", "0"}, "--kube-api-qps must be > 0"},
		{[]string{"scheduler", "--kubeconfig", writeKubeconfig(t), "--preemption-min-runtime", "-1s"}, "--preemption-min-runtime must be >= 0"},
		{[]string{"scheduler", "--kubeconfig", writeKubeconfig(t), "--reservation-wait", "-5m"}, "--reservation-wait must be >= 0"},
		{[]string{"scheduler", "--kubeconfig", writeKubeconfig(t), "--pod-initial-backoff", "0s"}, "--pod-initial-backoff must be > 0 and --pod-max-backoff >= it, got 0s and 10s"},
		{[]string{"scheduler", "--kubeconfig", writeKubeconfig(t), "--pod-initial-backoff", "20s"}, "--pod-initial-backoff must be > 0 and --pod-max-backoff >= it, got 20s and 10s"},
		{[]string{"scheduler", "--kubeconfig", writeKubeconfig(t), "--policy", "magic", "--metrics-addr", "127.0.0.1:1"}, `--policy: unknown policy "magic"`},
	}
	for _, tc := range tests {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// writeKubeconfig writes a syntactically valid kubeconfig pointing nowhere.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
