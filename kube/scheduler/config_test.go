package scheduler

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
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
	for _, le := range []LeaderElection{
		{},
		{Identity: "a", LeaseDuration: 2e9, RenewDeadline: 3e9, RetryPeriod: 1e9},
	} {
		if err := s.RunWithLeaderElection(context.Background(), le); err == nil {
			t.Errorf("leader election %+v accepted", le)
		}
	}
}
