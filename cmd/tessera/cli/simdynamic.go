package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/tracesim"
)

type simDynamicOptions struct {
	traces      []string
	nodes       string
	policies    string
	seeds       string
	tune        float64
	load        float64
	compression float64
	period      float64
	parallel    int
	outDir      string
	queues      string
	preemption  bool
	minRuntime  float64
	gangs       bool
	mig         string
	migMemory   string
}

func newSimDynamicCommand(a *app) *cobra.Command {
	var o simDynamicOptions
	cmd := &cobra.Command{
		Use:   "dynamic",
		Short: "Replay traces with departures and waiting, through the scheduling cycle",
		Long: `Replay a GPU cluster trace with time: each pod arrives at its creation_time,
runs for deletion_time - creation_time once started, and waits while it does not
fit, retried every cycle, through the same scheduling cycle (package cycle) the
scheduler and the host daemon use. The trace's pods plus copies drawn from it
make --tune times the cluster's GPU capacity (as in "tessera sim"); arrival times
are divided by the factor that makes the GPU demand offered over the arrival
window --load times the capacity (or by --compression); durations are kept.

Without --queues every pod is in one default queue. --queues FILE (YAML or
JSON) defines queues (name, qos, guaranteed, weight, limit, preemptible) and
maps each pod to one by its qos column: the queue whose qos list names it, else
the queue that lists "*"; "priorities" gives pod priorities by qos class.
guaranteed and limit are GPUs ("30%" of the cluster's, or a number: 600, 0.5).

--preemption lets a pod that fits nowhere stop running pods of preemptible
queues, by the cycle's rules: a lower priority in its own queue, or reclaim
from a queue above its guarantee while the pod's own queue stays within its
guarantee. A stopped pod waits again and restarts from the beginning (the GPU
time it ran is counted as lost); the pod that stopped it starts at once on
the node they freed. --min-runtime protects pods younger than that. --gangs
places each multi-GPU pod as a gang of one-GPU members (CPU and memory split
evenly), all or nothing, on any nodes.

For every trace x policy x seed it prints the time-weighted GPU allocation over
the arrival window, the pods started and never started, and the queueing delay
(mean, p50, p95, p99; the time a pod waited in all; the replay goes on after
the last arrival until every pod has started), then means over seeds; with
--queues, the same per queue with the pods stopped by preemption and reclaim.
-o DIR writes dynamic.json (one object per run), dynamic.md (the tables),
series.csv (allocation and waiting pods at every cycle), with --queues
series_queues.csv (the same per queue), and dynamic_<trace>_seed<N>.svg
(allocation and waiting pods over time, one line per policy).

With --mig MODEL the MIG variant is replayed, as "tessera sim --mig" does it
without departures: every GPU made MODEL, every GPU pod mapped to a MIG
profile, and --policy names setups (all six by default:
` + strings.Join(tracesim.MIGSetups(), ", ") + `). A pod that ends gives back its
instance (a managed GPU destroys it). The MIG table adds, time-weighted over
the arrival window: the compute the running pods hold and ask, the waiting
pods, the demand never started, the free compute no request can use (outside
the largest instance each GPU can still give) or no whole-GPU request can use,
and the tries that fit nowhere with, of them, those no node had GPU room for.
--queues, --preemption and --gangs are not modelled with --mig
(docs/simulator.md, "MIG with departures").`,
		Example: `  tessera sim dynamic --trace ../shared/traces/openb/openb_pod_list_default.csv \
      --nodes ../shared/traces/openb/openb_node_list_gpu_node.csv \
      --policy bestfit,fgd,tessera --seeds 42-51 -o out/dynamic

  # LS and BE as two queues, BE preemptible, multi-GPU pods as gangs
  tessera sim dynamic --trace ../shared/traces/openb/openb_pod_list_default.csv \
      --nodes ../shared/traces/openb/openb_node_list_gpu_node.csv \
      --queues tracesim/testdata/queues-ls-be.yaml --preemption --gangs -o out/lsbe

  # the MIG variant on A100-40GB GPUs, every setup
  tessera sim dynamic --trace ../shared/traces/openb/openb_pod_list_default.csv \
      --nodes ../shared/traces/openb/openb_node_list_gpu_node.csv \
      --mig A100-40GB --seeds 42-51 -o out/mig-dynamic`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runSimDynamic(cmd, &o) },
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.traces, "trace", nil, "pod list CSV with creation_time and deletion_time; repeat or separate with commas")
	f.StringVar(&o.nodes, "nodes", "", "node list CSV (openb_node_list_gpu_node.csv)")
	f.StringVar(&o.policies, "policy", "bestfit,fgd,tessera", "policies, comma-separated: "+strings.Join(placement.Names(), ", "))
	f.StringVar(&o.seeds, "seeds", "42", `seeds, comma-separated, ranges allowed ("42-51")`)
	f.Float64Var(&o.tune, "tune", 1.5, "GPU demand of all arrivals (trace plus copies) as a multiple of cluster GPU capacity, in (0, 10]")
	f.Float64Var(&o.load, "load", 1.2, "GPU demand offered over the arrival window as a multiple of capacity, in (0, --tune)")
	f.Float64Var(&o.compression, "compression", 0, "divide arrival times by this instead of deriving it from --load (> 0)")
	f.Float64Var(&o.period, "period", 10, "simulated seconds between scheduling cycles, in (0, 3600]")
	f.IntVar(&o.parallel, "parallel", 1, "replays run at once, in [1, 256]")
	f.StringVarP(&o.outDir, "output", "o", "", "directory for dynamic.json, dynamic.md, series.csv and the plots")
	f.StringVar(&o.queues, "queues", "", "queue config (YAML or JSON): queues and the qos classes mapped to them; default one queue")
	f.BoolVar(&o.preemption, "preemption", false, "let waiting pods stop running pods of preemptible queues (priority, reclaim); needs --queues")
	f.Float64Var(&o.minRuntime, "min-runtime", 0, "with --preemption, protect pods that have run less than this many simulated seconds, >= 0")
	f.BoolVar(&o.gangs, "gangs", false, "place each multi-GPU pod as a gang of one-GPU members, all or nothing")
	f.StringVar(&o.mig, "mig", "", "replay the MIG variant: every GPU made this catalog model (A100-40GB, H100-SXM, ...), GPU pods mapped to MIG profiles; --policy then names setups: "+strings.Join(tracesim.MIGSetups(), ", ")+" (all by default)")
	f.StringVar(&o.migMemory, "mig-memory", tracesim.MIGMemoryShare, "with --mig, the GPU memory a sharing pod needs: share (its compute share of the GPU's memory) or none (compute alone picks the profile)")
	setRange(cmd, "tune", "in (0, 10]")
	setRange(cmd, "load", "in (0, --tune)")
	setRange(cmd, "period", "in (0, 3600]")
	setRange(cmd, "parallel", "in [1, 256]")
	setRange(cmd, "min-runtime", ">= 0")
	return cmd
}

func (o *simDynamicOptions) validate() ([]string, []uint64, error) {
	shared := simOptions{traces: o.traces, nodes: o.nodes, policies: o.policies, seeds: o.seeds, tune: o.tune, popularity: 0.95, parallel: o.parallel, plotFormat: "png",
		mig: o.mig, migMemory: o.migMemory}
	pols, seeds, err := shared.validate(false)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case math.IsNaN(o.compression) || o.compression < 0:
		return nil, nil, fmt.Errorf("--compression: must be > 0 (or 0 to derive it from --load), got %g", o.compression)
	case o.compression == 0 && !(o.load > 0 && o.load < o.tune):
		return nil, nil, fmt.Errorf("--load: must be in (0, --tune = %g), got %g (the arrivals ask --tune times the capacity in all, so they cannot offer more)", o.tune, o.load)
	case !(o.period > 0 && o.period <= 3600):
		return nil, nil, fmt.Errorf("--period: must be in (0, 3600] seconds, got %g", o.period)
	case o.preemption && o.queues == "":
		return nil, nil, errors.New("--preemption: needs --queues (in the one default queue every pod has the same priority, so none may stop another)")
	case !(o.minRuntime >= 0) || math.IsInf(o.minRuntime, 1):
		return nil, nil, fmt.Errorf("--min-runtime: must be >= 0 simulated seconds, got %g", o.minRuntime)
	case o.mig != "" && o.queues != "":
		return nil, nil, errors.New("--queues: not modelled with --mig (one default queue serves every pod); leave one out")
	case o.mig != "" && o.preemption:
		return nil, nil, errors.New("--preemption: not modelled with --mig; leave one out")
	case o.mig != "" && o.gangs:
		return nil, nil, errors.New("--gangs: not modelled with --mig (a multi-GPU pod takes one instance on each of its GPUs, on one node); leave one out")
	}
	return pols, seeds, nil
}

func (a *app) runSimDynamic(cmd *cobra.Command, o *simDynamicOptions) error {
	if o.mig != "" && !cmd.Flags().Changed("policy") {
		o.policies = strings.Join(tracesim.MIGSetups(), ",")
	}
	pols, seeds, err := o.validate()
	if err != nil {
		return asUsage(err)
	}
	var variant *tracesim.MIGVariant
	if o.mig != "" {
		if variant, err = tracesim.NewMIGVariant(catalog.Default(), o.mig, o.migMemory); err != nil {
			return usageError("--mig: %v", err)
		}
	}
	var queues *tracesim.QueueConfig
	if o.queues != "" {
		if queues, err = tracesim.LoadQueueConfig(o.queues); err != nil {
			return loadError("--queues", o.queues, err)
		}
	}
	nodes, err := simSetup(o.outDir, o.nodes)
	if err != nil {
		return err
	}
	if queues != nil {
		if _, err := queues.Tree(nodes.TotalGPUMilli()); err != nil {
			return usageError("--queues %s: %v (the cluster of --nodes)", o.queues, err)
		}
	}
	type job struct {
		trace string
		pods  []tracesim.TimedPod
		pol   string
		seed  uint64
	}
	var jobs []job
	for _, path := range o.traces {
		pods, err := tracesim.LoadTimedPods(path)
		if err != nil {
			return loadError("--trace", path, err)
		}
		if queues != nil {
			if err := queues.CheckPods(pods); err != nil {
				return usageError("--queues %s: %v, in --trace %s", o.queues, err, path)
			}
		}
		for _, pol := range pols {
			for _, seed := range seeds {
				jobs = append(jobs, job{tracesim.TraceName(path), pods, pol, seed})
			}
		}
	}
	results := make([]*tracesim.DynamicResult, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, o.parallel)
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = tracesim.ReplayDynamic(cmd.Context(), tracesim.DynamicConfig{
				Trace: j.trace, Nodes: nodes, Pods: j.pods, Policy: j.pol, Seed: j.seed,
				Tune: o.tune, Load: o.load, Compression: o.compression, Period: o.period,
				Queues: queues, Preemption: o.preemption, MinRuntime: o.minRuntime, Gangs: o.gangs, MIG: variant,
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	tables := tracesim.DynamicTable(results) + "\nMeans over seeds:\n\n" + tracesim.DynamicMeans(results)
	if variant != nil {
		tables += "\nMIG, means over seeds ± standard deviation:\n\n" + tracesim.DynamicMIGTable(results, pols)
	}
	if queues != nil {
		tables += "\nPer queue:\n\n" + tracesim.DynamicQueueTable(results) + "\nPer queue, means over seeds:\n\n" + tracesim.DynamicQueueMeans(results)
	}
	if _, err := io.WriteString(a.stdout, tables); err != nil {
		return err
	}
	if o.outDir == "" {
		return nil
	}
	if err := writeFile(filepath.Join(o.outDir, "dynamic.md"), func(w io.Writer) error { _, err := io.WriteString(w, tables); return err }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.outDir, "dynamic.json"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.outDir, "series.csv"), func(w io.Writer) error { return tracesim.WriteSeriesCSV(w, results) }); err != nil {
		return err
	}
	if queues != nil {
		if err := writeFile(filepath.Join(o.outDir, "series_queues.csv"), func(w io.Writer) error { return tracesim.WriteQueueSeriesCSV(w, results) }); err != nil {
			return err
		}
	}
	_, err = tracesim.WriteDynamicPlots(o.outDir, results)
	return err
}
