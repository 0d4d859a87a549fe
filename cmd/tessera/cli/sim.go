package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/tracesim"
)

// simOptions are the flags shared by `sim` and `sim compare`.
type simOptions struct {
	traces     []string
	nodes      string
	policies   string
	seeds      string
	tune       float64
	popularity float64
	parallel   int
	outDir     string
	published  string
	plotFormat string
	quiet      bool
	breakdown  bool
	mig        string
	migMemory  string
}

func (o *simOptions) register(cmd *cobra.Command, defaultPolicies string) {
	f := cmd.Flags()
	f.StringSliceVar(&o.traces, "trace", nil, "pod list CSV (openb_pod_list_*.csv); repeat or separate with commas for several traces")
	f.StringVar(&o.nodes, "nodes", "", "node list CSV (openb_node_list_gpu_node.csv)")
	f.StringVar(&o.policies, "policy", defaultPolicies, "policies, comma-separated: "+strings.Join(placement.Names(), ", "))
	f.StringVar(&o.seeds, "seeds", "42", `seeds, comma-separated, ranges allowed ("42-51")`)
	f.Float64Var(&o.tune, "tune", 1.3, "stop arrivals when GPU demand reaches this multiple of cluster GPU capacity, in (0, 10]")
	f.Float64Var(&o.popularity, "popularity", 0.95, "share of the trace's pods the typical shapes cover, in (0, 1]")
	f.IntVar(&o.parallel, "parallel", runtime.NumCPU(), "replays run at once, in [1, 256]")
	f.StringVarP(&o.outDir, "output", "o", "", "directory for curves.csv, summary.json, summary.md and the plots")
	f.StringVar(&o.published, "published", "", "the study's analysis_allo_discrete.csv, to print its numbers beside ours")
	f.StringVar(&o.plotFormat, "plot-format", "png", "plot file format: png or svg")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar on stderr")
	f.BoolVar(&o.breakdown, "breakdown", false, "also write breakdown.md: where capacity is left unallocated at the end (needs -o)")
	f.StringVar(&o.mig, "mig", "", "replay the MIG variant: every GPU made this catalog model (A100-40GB, H100-SXM, ...), GPU pods mapped to MIG profiles; --policy then names setups: "+strings.Join(tracesim.MIGSetups(), ", ")+" (all by default)")
	f.StringVar(&o.migMemory, "mig-memory", tracesim.MIGMemoryShare, "with --mig, the GPU memory a sharing pod needs: share (its compute share of the GPU's memory) or none (compute alone picks the profile)")
	setRange(cmd, "tune", "in (0, 10]")
	setRange(cmd, "popularity", "in (0, 1]")
	setRange(cmd, "parallel", "in [1, 256]")
}

func (o *simOptions) validate(needOut bool) ([]string, []uint64, error) {
	if len(o.traces) == 0 {
		return nil, nil, fmt.Errorf("--trace: give at least one pod list CSV")
	}
	if o.nodes == "" {
		return nil, nil, fmt.Errorf("--nodes: give the node list CSV")
	}
	if needOut && o.outDir == "" {
		return nil, nil, fmt.Errorf("-o/--output: give a directory for the results")
	}
	if o.breakdown && o.outDir == "" {
		return nil, nil, fmt.Errorf("--breakdown: give -o/--output, the directory breakdown.md is written to")
	}
	if !(o.tune > 0 && o.tune <= 10) {
		return nil, nil, fmt.Errorf("--tune: must be in (0, 10], got %g", o.tune)
	}
	if err := o.validateMIG(); err != nil {
		return nil, nil, err
	}
	if !(o.popularity > 0 && o.popularity <= 1) {
		return nil, nil, fmt.Errorf("--popularity: must be in (0, 1], got %g", o.popularity)
	}
	if o.parallel < 1 || o.parallel > 256 {
		return nil, nil, fmt.Errorf("--parallel: must be in [1, 256], got %d", o.parallel)
	}
	if o.plotFormat != "png" && o.plotFormat != "svg" {
		return nil, nil, fmt.Errorf("--plot-format: must be png or svg, got %q", o.plotFormat)
	}
	var pols []string
	for _, p := range strings.Split(o.policies, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		name, err := o.policyName(p)
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains(pols, name) {
			pols = append(pols, name)
		}
	}
	if len(pols) == 0 {
		names := placement.Names()
		if o.mig != "" {
			names = tracesim.MIGSetups()
		}
		return nil, nil, fmt.Errorf("--policy: give at least one of %s", strings.Join(names, ", "))
	}
	seeds, err := parseSeeds(o.seeds)
	if err != nil {
		return nil, nil, err
	}
	return pols, seeds, nil
}

// validateMIG checks the flags that go with --mig.
func (o *simOptions) validateMIG() error {
	if o.mig == "" {
		if o.migMemory != "" && o.migMemory != tracesim.MIGMemoryShare {
			return fmt.Errorf("--mig-memory: needs --mig (the model every GPU is made)")
		}
		return nil
	}
	switch {
	case o.migMemory != tracesim.MIGMemoryShare && o.migMemory != tracesim.MIGMemoryNone:
		return fmt.Errorf("--mig-memory: must be %s or %s, got %q", tracesim.MIGMemoryShare, tracesim.MIGMemoryNone, o.migMemory)
	case o.breakdown:
		return fmt.Errorf("--breakdown: not defined for the MIG variant; leave it out with --mig")
	case o.published != "":
		return fmt.Errorf("--published: the study published no MIG numbers; leave it out with --mig")
	}
	return nil
}

// policyName is the canonical name of a --policy entry: a policy, or with
// --mig a MIG setup.
func (o *simOptions) policyName(p string) (string, error) {
	if o.mig != "" {
		name := strings.ToLower(p)
		if !slices.Contains(tracesim.MIGSetups(), name) {
			return "", fmt.Errorf("--policy: with --mig, name MIG setups (%s), got %q", strings.Join(tracesim.MIGSetups(), ", "), p)
		}
		return name, nil
	}
	name, err := placement.Canonical(p) // "default" and "tessera" are one policy, named tessera in every output
	if err != nil {
		return "", fmt.Errorf("--policy: %w", err)
	}
	return name, nil
}

// parseSeeds reads "42,43" and "42-51" (at most 10,000 seeds).
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 64)
		}
		if err != nil || b < a || b-a >= 10000 {
			return nil, fmt.Errorf("--seeds: %q is not a seed or an ascending range such as 42-51", part)
		}
		for v := a; v <= b; v++ {
			out = append(out, v)
		}
	}
	if len(out) == 0 || len(out) > 10000 {
		return nil, fmt.Errorf("--seeds: give between 1 and 10000 seeds, got %d", len(out))
	}
	return out, nil
}

func newSimCommand(a *app) *cobra.Command {
	var o simOptions
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Replay GPU cluster traces against placement policies",
		Long: `Replay a GPU cluster trace (the Alibaba openb traces of the FGD study, ATC'23)
against placement policies, the way the study's simulator does: the trace's
pods arrive one at a time in a seeded random order, then random copies of
them until the GPU demand reaches --tune times the cluster's GPU capacity; each
pod is placed by the policy or dropped if nothing fits; pods never leave.

For every trace x policy x seed it records the share of GPU capacity allocated
at each percent of arrived demand, the fragmentation (the study's definition)
and the dropped pods, and writes to -o DIR:

  curves.csv            one row per run and arrived percent
  summary.json          one object per run (allocation at 100% and at the end,
                        failed pods, failed GPU request %)
  summary.md            the table printed on stdout, means over seeds
  allocation.png|svg    allocation vs arrived demand, and a zoom on 80-130%
  breakdown.md          with --breakdown: where capacity is left unallocated
                        at the end (what the GPUs with free compute hold, CPU
                        per node type, sharing pods placed of those arrived)

Policies: ` + strings.Join(placement.Names(), ", ") + `; "tessera" (or "default") is the default
policy, "*-online" variants learn the pod-shape distribution only from pods
that have arrived.

With --mig MODEL the MIG variant is replayed instead: every GPU of the node
list made MODEL (a catalog model with MIG, such as A100-40GB or H100-SXM),
every GPU pod mapped to the smallest MIG profile covering its compute share
(and, with --mig-memory share, its share of the GPU's memory), whole-GPU pods
to one full-GPU instance per GPU. --policy then names setups (all by default):
fractional (no MIG, Tessera's default policy), static-all-1g and
static-all-balanced (mig-parted layouts made up front), template (HAMi's
first design), first-fit and tessera (Tessera's MIG planner). The table shows
what the placed pods hold (a MIG instance its slices) beside what they ask,
and mig.png|svg draws both and the failed requests (docs/simulator.md, "MIG:
what isolation costs").`,
		Example: `  tessera sim --trace ../shared/traces/openb/openb_pod_list_default.csv \
      --nodes ../shared/traces/openb/openb_node_list_gpu_node.csv \
      --policy fgd,tessera --seeds 42-51 --tune 1.3 -o out/default`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runSim(cmd, &o, true)
		},
	}
	o.register(cmd, placement.DefaultPolicy)
	cmd.AddCommand(newSimCompareCommand(a), newSimDynamicCommand(a), newSimVariantCommand(a))
	return cmd
}

func newSimCompareCommand(a *app) *cobra.Command {
	var o simOptions
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Run several policies x traces x seeds in parallel and print one table",
		Long: `Run every policy on every trace for every seed, in parallel, and print one
table of means over seeds: allocation at 100% arrived demand and at the end,
failed pods and failed GPU request share. With --published (the study's
expected/analysis_allo_discrete.csv) the study's numbers for the same trace and
policy are printed beside ours. With -o the outputs of "tessera sim" are
written too.`,
		Example: `  tessera sim compare --nodes ../shared/traces/openb/openb_node_list_gpu_node.csv \
      --trace ../shared/traces/openb/openb_pod_list_default.csv,../shared/traces/openb/openb_pod_list_gpushare40.csv \
      --policy random,bestfit,fgd,tessera --seeds 42-51 \
      --published ../shared/traces/openb/expected/analysis_allo_discrete.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runSim(cmd, &o, false)
		},
	}
	o.register(cmd, "random,dotproduct,gpuclustering,gpupacking,bestfit,fgd,tessera,tessera-online")
	return cmd
}

func (a *app) runSim(cmd *cobra.Command, o *simOptions, needOut bool) error {
	if o.mig != "" && !cmd.Flags().Changed("policy") {
		o.policies = strings.Join(tracesim.MIGSetups(), ",")
	}
	pols, seeds, err := o.validate(needOut)
	if err != nil {
		return asUsage(err)
	}
	var variant *tracesim.MIGVariant
	if o.mig != "" {
		if variant, err = tracesim.NewMIGVariant(catalog.Default(), o.mig, o.migMemory); err != nil {
			return usageError("--mig: %v", err)
		}
	}
	nodes, err := simSetup(o.outDir, o.nodes)
	if err != nil {
		return err
	}
	m := tracesim.Matrix{Nodes: nodes, Policies: pols, Seeds: seeds, Tune: o.tune, Popularity: o.popularity, Parallel: o.parallel, Breakdown: o.breakdown, MIG: variant}
	for _, path := range o.traces {
		pods, err := tracesim.LoadPods(path)
		if err != nil {
			return loadError("--trace", path, err)
		}
		m.Traces = append(m.Traces, tracesim.Trace{Name: tracesim.TraceName(path), Pods: pods})
	}
	var published tracesim.PublishedTable
	if o.published != "" {
		if published, err = tracesim.LoadPublished(o.published, o.tune); err != nil {
			return loadError("--published", o.published, err)
		}
	}
	var bar *progressBar
	if !o.quiet {
		bar = &progressBar{w: a.stderr, runs: len(m.Traces) * len(pols) * len(seeds)}
		m.Progress = bar.update
	}
	a.log.Debug("simulating", "traces", len(m.Traces), "policies", pols, "seeds", len(seeds), "nodes", len(nodes.Nodes), "parallel", o.parallel)
	start := time.Now()
	results, err := m.Run(cmd.Context())
	bar.finish()
	if err != nil {
		return err
	}
	a.log.Info("simulation done", "runs", len(results), "elapsed", time.Since(start).Round(time.Millisecond))
	if variant != nil {
		rows := tracesim.MIGTable(results, pols)
		if err := tracesim.WriteMIGTable(a.stdout, rows); err != nil {
			return err
		}
		if o.outDir == "" {
			return nil
		}
		return writeMIGOutputs(o.outDir, o.plotFormat, results, rows)
	}
	rows := tracesim.Table(results, pols, published)
	if err := tracesim.WriteTable(a.stdout, rows); err != nil {
		return err
	}
	if o.outDir == "" {
		return nil
	}
	return writeSimOutputs(o.outDir, o.plotFormat, results, rows, pols)
}

// writeMIGOutputs writes the MIG variant's outputs: curves.csv,
// summary.json, summary.md (the MIG table), the allocation plots (what
// the placed pods hold) and mig.png|svg (held, asked and failed per setup).
func writeMIGOutputs(dir, plotFormat string, results []*tracesim.Result, rows []tracesim.MIGRow) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-o/--output: %w", err)
	}
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{"curves.csv", func(w io.Writer) error { return tracesim.WriteCurvesCSV(w, results) }},
		{"summary.json", func(w io.Writer) error { return tracesim.WriteSummaryJSON(w, results) }},
		{"summary.md", func(w io.Writer) error { return tracesim.WriteMIGTable(w, rows) }},
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), f.write); err != nil {
			return err
		}
	}
	return writePlots(
		func() error { return tracesim.WritePlot(filepath.Join(dir, "allocation."+plotFormat), results) },
		func() error {
			return tracesim.WriteZoomPlot(filepath.Join(dir, "allocation_zoom."+plotFormat), results)
		},
		func() error { return tracesim.WriteMIGPlot(filepath.Join(dir, "mig."+plotFormat), rows) },
	)
}

// simSetup checks that -o (when given) is writable, then loads --nodes.
func simSetup(outDir, nodesPath string) (*placement.Cluster, error) {
	if outDir != "" {
		if err := checkWritable(outDir); err != nil {
			return nil, err
		}
	}
	nodes, err := tracesim.LoadNodes(nodesPath)
	if err != nil {
		return nil, loadError("--nodes", nodesPath, err)
	}
	return nodes, nil
}

// checkWritable makes sure the output folder exists (creating it) and
// takes a file, so a replay never ends on an unwritable -o.
func checkWritable(dir string) error {
	fail := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // "permission denied", "not a directory", "read-only file system"
		}
		return usageError("-o/--output: must be a folder this user can write, got %q (%v)", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(dir, ".tessera-sim-*")
	if err != nil {
		return fail(err)
	}
	name := f.Name()
	if err := errors.Join(f.Close(), os.Remove(name)); err != nil {
		return fail(err)
	}
	return nil
}

// loadError names the flag of a file that could not be loaded; a file
// that cannot be opened at all is a usage error.
func loadError(flag, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return usageError("%s: cannot read %q (%v)", flag, path, pe.Err)
	}
	return fmt.Errorf("%s %s: %w", flag, path, err)
}

func writeSimOutputs(dir, plotFormat string, results []*tracesim.Result, rows []tracesim.Row, pols []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-o/--output: %w", err)
	}
	type output struct {
		name  string
		write func(io.Writer) error
	}
	files := []output{
		{"curves.csv", func(w io.Writer) error { return tracesim.WriteCurvesCSV(w, results) }},
		{"summary.json", func(w io.Writer) error { return tracesim.WriteSummaryJSON(w, results) }},
		{"summary.md", func(w io.Writer) error { return tracesim.WriteTable(w, rows) }},
	}
	if slices.ContainsFunc(results, func(r *tracesim.Result) bool { return r.Breakdown != nil }) {
		files = append(files, output{"breakdown.md", func(w io.Writer) error { return tracesim.WriteBreakdown(w, results, pols) }})
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), f.write); err != nil {
			return err
		}
	}
	return writePlots(
		func() error { return tracesim.WritePlot(filepath.Join(dir, "allocation."+plotFormat), results) },
		func() error {
			return tracesim.WriteZoomPlot(filepath.Join(dir, "allocation_zoom."+plotFormat), results)
		},
	)
}

// writePlots draws the plots at once (each renders on its own; a PNG's
// rasterising is most of a short replay's output time) and returns the
// first error.
func writePlots(plots ...func() error) error {
	var g errgroup.Group
	for _, p := range plots {
		g.Go(p)
	}
	return g.Wait()
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// progressBar draws one line on stderr: arrivals placed over all replays.
type progressBar struct {
	mu   sync.Mutex
	w    io.Writer
	runs int
	last int
}

func (b *progressBar) update(done, total int64) {
	if total <= 0 {
		return
	}
	pct := int(min(100, 100*done/total))
	b.mu.Lock()
	defer b.mu.Unlock()
	if pct == b.last {
		return
	}
	b.last = pct
	fill := pct * 30 / 100
	fmt.Fprintf(b.w, "\rsimulating %d runs [%s%s] %3d%%", b.runs, strings.Repeat("#", fill), strings.Repeat(".", 30-fill), pct)
}

func (b *progressBar) finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last > 0 {
		fmt.Fprintln(b.w)
	}
}
