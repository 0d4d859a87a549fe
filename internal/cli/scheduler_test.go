package cli

import (
	"strings"
	"testing"
)

func TestSchedulerFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"scheduler", "--kubeconfig", "/does/not/exist"}, "--kubeconfig:"},
		{[]string{"scheduler", "--kubeconfig", "/does/not/exist", "extra"}, "unknown command"},
		{[]string{"scheduler", "--seed", "-1"}, `invalid argument "-1" for "--seed"`},
	}
	for _, tc := range tests {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and %q", tc.args, code, errOut, tc.want)
		}
	}
}
