package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tessera-gpu/tessera/test/toolbin"
)

// StartKubeScheduler starts the stock kube-scheduler (built from the tools
// module) against the cluster, without leader election, with the given
// client rate limits (qps 0: kube-scheduler's own defaults) and any more
// command-line flags (e.g. --feature-gates=...). StopKubeScheduler or Stop
// stops it.
func (c *Cluster) StartKubeScheduler(ctx context.Context, qps float32, burst int, flags ...string) error {
	if c.kubeScheduler != nil {
		return fmt.Errorf("kube-scheduler is already running")
	}
	bin, err := toolbin.Binary(ctx, "kube-scheduler")
	if err != nil {
		return err
	}
	cfg := filepath.Join(c.Dir, "kube-scheduler.yaml")
	limits := ""
	if qps > 0 {
		limits = fmt.Sprintf("  qps: %v\n  burst: %d\n", qps, burst)
	}
	body := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
%sleaderElection:
  leaderElect: false
`, c.Kubeconfig, limits)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return fmt.Errorf("write kube-scheduler config: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	args := append([]string{"--config=" + cfg, "--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[0]),
		"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig, "--v=0"}, flags...)
	c.kubeScheduler, err = startProcess("kube-scheduler", bin, c.Dir, args...)
	return err
}

// StopKubeScheduler stops the kube-scheduler StartKubeScheduler started, if any.
func (c *Cluster) StopKubeScheduler() {
	c.kubeScheduler.stop(5 * time.Second)
	c.kubeScheduler = nil
}
