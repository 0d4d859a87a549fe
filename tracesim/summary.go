package tracesim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
)

// RunSummary is one replay's line in summary.json.
type RunSummary struct {
	Trace                 string  `json:"trace"`
	Policy                string  `json:"policy"`
	Seed                  uint64  `json:"seed"`
	AllocatedPctAt100     float64 `json:"allocated_pct_at_100"`
	AllocatedPctAtEnd     float64 `json:"allocated_pct_at_end"`
	FailedPods            int     `json:"failed_pods"`
	FailedGPURequestPct   float64 `json:"failed_gpu_request_pct"`
	ElapsedSeconds        float64 `json:"elapsed_seconds"`
	Pods                  int     `json:"pods"`
	FragmentationPctAtEnd float64 `json:"fragmentation_pct_at_end"`
	// MIG is set for a replay of the MIG variant (allocation then counts
	// what instances hold).
	MIG *MIGSummary `json:"mig,omitempty"`
}

// MIGSummary is the MIG variant's part of a summary line.
type MIGSummary struct {
	Model          string  `json:"model"`
	Memory         string  `json:"memory"`
	AskedPctAtEnd  float64 `json:"asked_pct_at_end"`
	MemoryPctAtEnd float64 `json:"memory_pct_at_end"`
	WholeGPUs      int     `json:"whole_gpus,omitempty"`
}

// Summarise reduces a replay to its summary line.
func Summarise(r *Result) RunSummary {
	s := RunSummary{
		Trace: r.Trace, Policy: r.Policy, Seed: r.Seed,
		AllocatedPctAt100: round2(r.At(100)), AllocatedPctAtEnd: round2(r.AllocatedPctEnd),
		FailedPods: r.FailedPods, FailedGPURequestPct: round2(r.FailedGPUPct()),
		ElapsedSeconds: math.Round(r.Elapsed.Seconds()*1000) / 1000, Pods: r.Pods,
	}
	if len(r.Curve) > 0 {
		s.FragmentationPctAtEnd = round2(r.Curve[len(r.Curve)-1].FragPct)
	}
	if m := r.MIG; m != nil {
		s.MIG = &MIGSummary{Model: m.Model, Memory: m.Memory, AskedPctAtEnd: round2(m.AskedPctEnd), MemoryPctAtEnd: round2(m.MemoryPctEnd), WholeGPUs: m.WholeGPUs}
	}
	if math.IsNaN(s.AllocatedPctAt100) {
		s.AllocatedPctAt100 = 0
	}
	return s
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// WriteSummaryJSON writes one summary object per replay, sorted by trace,
// policy and seed.
func WriteSummaryJSON(w io.Writer, results []*Result) error {
	out := make([]RunSummary, 0, len(results))
	for _, r := range results {
		out = append(out, Summarise(r))
	}
	slices.SortFunc(out, func(a, b RunSummary) int {
		return cmp.Or(cmp.Compare(a.Trace, b.Trace), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Seed, b.Seed))
	})
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write summary.json: %w", err)
	}
	return nil
}

// WriteCurvesCSV writes every replay's curve, one row per arrived percent.
func WriteCurvesCSV(w io.Writer, results []*Result) error {
	if _, err := fmt.Fprintln(w, "trace,policy,seed,arrived_pct,allocated_pct,frag_pct"); err != nil {
		return fmt.Errorf("write curves: %w", err)
	}
	for _, r := range results {
		for _, p := range r.Curve {
			if _, err := fmt.Fprintf(w, "%s,%s,%d,%d,%.4f,%.4f\n", r.Trace, r.Policy, r.Seed, p.ArrivedPct, p.AllocatedPct, p.FragPct); err != nil {
				return fmt.Errorf("write curves: %w", err)
			}
		}
	}
	return nil
}

// Row is one (trace, policy) line of the summary table: means over seeds.
type Row struct {
	Trace, Policy string
	Seeds         int
	At100, AtEnd  float64
	FailedPods    float64
	FailedGPUPct  float64
	SecondsPerRun float64
	Published     Published // zero when unknown
	HavePublished bool
}

// Table groups results by trace and policy and averages over seeds, in
// trace order then the order policies were given.
func Table(results []*Result, policyOrder []string, published PublishedTable) []Row {
	type key struct{ t, p string }
	acc := map[key]*Row{}
	var keys []key
	for _, r := range results {
		k := key{r.Trace, r.Policy}
		row, ok := acc[k]
		if !ok {
			row = &Row{Trace: r.Trace, Policy: r.Policy}
			acc[k] = row
			keys = append(keys, k)
		}
		row.Seeds++
		row.At100 += r.At(100)
		row.AtEnd += r.AllocatedPctEnd
		row.FailedPods += float64(r.FailedPods)
		row.FailedGPUPct += r.FailedGPUPct()
		row.SecondsPerRun += r.Elapsed.Seconds()
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(rankIn(policyOrder, a.p), rankIn(policyOrder, b.p)), cmp.Compare(a.p, b.p))
	})
	rows := make([]Row, 0, len(keys))
	for _, k := range keys {
		r := acc[k]
		n := float64(r.Seeds)
		r.At100 /= n
		r.AtEnd /= n
		r.FailedPods /= n
		r.FailedGPUPct /= n
		r.SecondsPerRun /= n
		r.Published, r.HavePublished = published.Lookup(r.Trace, r.Policy)
		rows = append(rows, *r)
	}
	return rows
}

// WriteTable writes rows as a Markdown table; published columns appear
// when any row has a published counterpart.
func WriteTable(w io.Writer, rows []Row) error {
	pub := slices.ContainsFunc(rows, func(r Row) bool { return r.HavePublished })
	head := "| trace | policy | seeds | alloc % at 100% | alloc % at end | failed pods | failed GPU req % | s/run |"
	sep := "|---|---|---|---|---|---|---|---|"
	if pub {
		head += " published at 100% | published at end |"
		sep += "---|---|"
	}
	if _, err := fmt.Fprintf(w, "%s\n%s\n", head, sep); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, r := range rows {
		line := fmt.Sprintf("| %s | %s | %d | %.2f | %.2f | %.1f | %.2f | %.2f |", r.Trace, r.Policy, r.Seeds, r.At100, r.AtEnd, r.FailedPods, r.FailedGPUPct, r.SecondsPerRun)
		if pub {
			if r.HavePublished {
				line += fmt.Sprintf(" %.2f | %.2f |", r.Published.At100, r.Published.AtEnd)
			} else {
				line += " | |"
			}
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	return nil
}

// rankIn is name's position in order, names not listed last.
func rankIn(order []string, name string) int {
	if i := slices.Index(order, name); i >= 0 {
		return i
	}
	return len(order)
}
