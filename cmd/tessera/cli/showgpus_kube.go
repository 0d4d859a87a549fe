package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/gpusummary"
	"github.com/tessera-gpu/tessera/kube/clusterinv"
)

// probeTimeout bounds how long --source auto waits for a cluster to answer.
const probeTimeout = 2 * time.Second

// kubeFlags are show-gpus's flags for a Kubernetes cluster, named as
// kubectl names them.
type kubeFlags struct {
	kubeconfig, context, poolLabel string
}

func (k *kubeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file for --source kube (default: $KUBECONFIG, a list merged as kubectl does, else ~/.kube/config, else in-cluster)")
	cmd.Flags().StringVar(&k.context, "context", "", "kubeconfig context for --source kube (default: the current context)")
	cmd.Flags().StringVar(&k.poolLabel, "pool-label", clusterinv.DefaultPoolLabel, "node label naming node pools, for --source kube; nodes without it are pooled by GPU model")
}

// check refuses the cluster flags with a source that does not read a cluster.
func (k *kubeFlags) check(cmd *cobra.Command, source string) error {
	if source != "kube" && source != "auto" {
		for _, name := range []string{"kubeconfig", "context", "pool-label"} {
			if cmd.Flags().Changed(name) {
				return usageError("--%s: applies only to --source kube or auto, got --source %q", name, source)
			}
		}
	}
	if err := clusterinv.CheckPoolLabel(k.poolLabel); err != nil {
		return usageError("--pool-label: %v", err)
	}
	return nil
}

// connect finds the cluster (exit 1 when it cannot: no kubeconfig, an
// unknown context).
func (k *kubeFlags) connect() (*clusterinv.Cluster, error) {
	c, err := clusterinv.Connect(clusterinv.Options{Kubeconfig: k.kubeconfig, Context: k.context})
	if err != nil {
		return nil, &exitError{code: 1, msg: err.Error()}
	}
	return c, nil
}

// autoCluster returns the cluster --source auto should read, or nil and
// the reason it should not (no kubeconfig, no answer within probeTimeout,
// no GPUNodes readable).
func (a *app) autoCluster(ctx context.Context, k *kubeFlags) (*clusterinv.Cluster, error) {
	c, err := clusterinv.Connect(clusterinv.Options{Kubeconfig: k.kubeconfig, Context: k.context})
	if err != nil {
		return nil, err
	}
	if err := c.Probe(ctx, probeTimeout); err != nil {
		return nil, err
	}
	return c, nil
}

// showCluster prints the GPUs of a cluster.
func (a *app) showCluster(ctx context.Context, c *clusterinv.Cluster, k *kubeFlags, opt gpusummary.Options, output string) error {
	r, err := c.Reader(k.poolLabel)
	if err != nil {
		return err
	}
	inv, err := r.Read(ctx)
	if err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("--source kube (context %q): %v", c.Context, err)}
	}
	for _, w := range inv.Warnings {
		fmt.Fprintf(a.stderr, "warning: %s\n", w)
	}
	opt.Pools, opt.PoolLabel = inv.Pools, k.poolLabel
	if inv.UseError != nil {
		fmt.Fprintf(a.stderr, "note: no USED column: %v\n", inv.UseError)
	} else {
		opt.Use = inv.Use
	}
	rep, err := gpusummary.Build(a.catalog, "kube:"+c.Context, inv.Nodes, opt)
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	if output != formatTable {
		return writeStructured(a.stdout, output, rep)
	}
	return writeGPUTable(a.stdout, rep)
}
