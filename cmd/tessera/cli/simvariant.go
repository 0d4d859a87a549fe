package cli

import (
	"fmt"
	"io"
	"math"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/tracesim"
)

type simVariantOptions struct {
	trace, nodes, out string
	cpuOnly, pinned   float64
	seed              uint64
}

func newSimVariantCommand(a *app) *cobra.Command {
	var o simVariantOptions
	cmd := &cobra.Command{
		Use:   "variant",
		Short: "Write a variant of a trace that stresses CPU or GPU-model constraints",
		Long: `Write a variant of a pod list, made the way the study's own variants are
(resampled from the trace), to check a policy on workloads it was not chosen on:

  --cpu-only F   the CPU-only pods times F (copies drawn with replacement, named
                 <name>-v<N>; below 1 a random subset), so CPU binds before GPU
  --pinned S     a share S of the GPU pods pinned to one GPU model (gpu_spec),
                 drawn in proportion to the cluster's GPUs of each model among
                 the models with a node big enough for the pod

The same --seed gives the same file. Replay it with "tessera sim --trace".`,
		Example: `  tessera sim variant --trace ../shared/traces/openb/openb_pod_list_default.csv \
      --nodes ../shared/traces/openb/openb_node_list_gpu_node.csv \
      --cpu-only 3 --seed 7 -o cpu-x3.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runSimVariant(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.trace, "trace", "", "pod list CSV to start from (required)")
	f.StringVar(&o.nodes, "nodes", "", "node list CSV the pins are drawn for (required with --pinned)")
	f.Float64Var(&o.cpuOnly, "cpu-only", 1, "CPU-only pods as a multiple of the trace's (0 to 100)")
	f.Float64Var(&o.pinned, "pinned", 0, "share of GPU pods pinned to one GPU model (0 to 1)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the draws")
	f.StringVarP(&o.out, "output", "o", "", "file to write (default: standard output)")
	return cmd
}

func (a *app) runSimVariant(cmd *cobra.Command, o *simVariantOptions) error {
	if o.trace == "" {
		return usageError("--trace: required (a pod list CSV such as openb_pod_list_default.csv)")
	}
	if math.IsNaN(o.cpuOnly) || o.cpuOnly < 0 || o.cpuOnly > 100 {
		return usageError("--cpu-only: must be 0 to 100 (a multiple of the trace's CPU-only pods), got %v", o.cpuOnly)
	}
	if math.IsNaN(o.pinned) || o.pinned < 0 || o.pinned > 1 {
		return usageError("--pinned: must be 0 to 1 (a share of the GPU pods), got %v", o.pinned)
	}
	if o.pinned > 0 && o.nodes == "" {
		return usageError("--nodes: required with --pinned (the cluster whose GPU models the pods are pinned to)")
	}
	nodes := &placement.Cluster{}
	if o.nodes != "" {
		var err error
		if nodes, err = tracesim.LoadNodes(o.nodes); err != nil {
			return loadError("--nodes", o.nodes, err)
		}
	}
	v := tracesim.Variant{CPUOnly: o.cpuOnly, Pinned: o.pinned, Seed: o.seed}
	write := func(w io.Writer) error {
		if err := tracesim.WriteVariant(w, o.trace, nodes, v); err != nil {
			return loadError("--trace", o.trace, err)
		}
		return nil
	}
	if o.out == "" {
		return write(cmd.OutOrStdout())
	}
	if err := writeFile(o.out, write); err != nil {
		return fmt.Errorf("-o/--output: %w", err)
	}
	return nil
}
