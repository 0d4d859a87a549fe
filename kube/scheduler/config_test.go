package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/kube/leader"
)

func TestConfigErrors(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Client is required") {
		t.Errorf("no client: %v", err)
	}
	if _, err := New(Config{Client: fake.NewClientset(), Policy: "magic"}); err == nil || !strings.Contains(err.Error(), `--policy: unknown policy "magic"`) {
		t.Errorf("bad policy: %v", err)
	}
	s, err := New(Config{Client: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	for _, le := range []leader.Config{
		{},
		{Identity: "a", LeaseDuration: 2e9, RenewDeadline: 3e9, RetryPeriod: 1e9},
	} {
		if err := s.RunWithLeaderElection(context.Background(), le); err == nil {
			t.Errorf("leader election %+v accepted", le)
		}
	}
}

// TestBackoffConfig: the backoff bounds default to kube-scheduler's and are
// checked.
func TestBackoffConfig(t *testing.T) {
	for _, tc := range []struct {
		name             string
		initial, max     time.Duration
		wantInit, wantMx time.Duration
		err              string
	}{
		{"defaults", 0, 0, time.Second, 10 * time.Second, ""},
		{"set", 200 * time.Millisecond, 2 * time.Second, 200 * time.Millisecond, 2 * time.Second, ""},
		{"initial above the default max", 30 * time.Second, 0, 30 * time.Second, 30 * time.Second, ""},
		{"negative", -time.Second, 0, 0, 0, "--pod-initial-backoff and --pod-max-backoff must be >= 0"},
		{"max below initial", 2 * time.Second, time.Second, 0, 0, "--pod-max-backoff must be >= --pod-initial-backoff (2s), got 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Client: fake.NewClientset(), PodInitialBackoff: tc.initial, PodMaxBackoff: tc.max})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c := s.core.Config(); c.InitialBackoff != tc.wantInit || c.MaxBackoff != tc.wantMx {
				t.Errorf("backoff %v..%v, want %v..%v", c.InitialBackoff, c.MaxBackoff, tc.wantInit, tc.wantMx)
			}
		})
	}
}
