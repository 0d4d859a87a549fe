package tracesim

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// MIGRow is one (trace, model, memory assumption, setup) line of the MIG
// table: means over seeds.
type MIGRow struct {
	Trace, Model, Memory, Setup string
	Seeds                       int
	// AllocatedEnd is what the placed pods hold at the end (% of GPU
	// compute capacity): a MIG instance its compute slices.
	AllocatedEnd float64
	// AskedEnd is the GPU compute the placed pods asked (the trace's
	// gpu_milli), % of capacity.
	AskedEnd float64
	// MemoryEnd is the GPU memory the placed pods hold (% of capacity): a
	// MIG instance its memory slices.
	MemoryEnd     float64
	FailedPods    float64
	FailedGPUPct  float64
	WholeGPUs     float64
	SecondsPerRun float64
}

// MIGTable groups the MIG variant's results (others are left out) and
// averages over seeds, in trace, model, memory order, then the setups'
// order.
func MIGTable(results []*Result, setupOrder []string) []MIGRow {
	type key struct{ t, m, mem, s string }
	acc := map[key]*MIGRow{}
	var keys []key
	for _, r := range results {
		if r.MIG == nil {
			continue
		}
		k := key{r.Trace, r.MIG.Model, r.MIG.Memory, r.Policy}
		row, ok := acc[k]
		if !ok {
			row = &MIGRow{Trace: r.Trace, Model: r.MIG.Model, Memory: r.MIG.Memory, Setup: r.Policy}
			acc[k] = row
			keys = append(keys, k)
		}
		row.Seeds++
		row.AllocatedEnd += r.AllocatedPctEnd
		row.AskedEnd += r.MIG.AskedPctEnd
		row.MemoryEnd += r.MIG.MemoryPctEnd
		row.FailedPods += float64(r.FailedPods)
		row.FailedGPUPct += r.FailedGPUPct()
		row.WholeGPUs += float64(r.MIG.WholeGPUs)
		row.SecondsPerRun += r.Elapsed.Seconds()
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.m, b.m), cmp.Compare(a.mem, b.mem), cmp.Compare(rankIn(setupOrder, a.s), rankIn(setupOrder, b.s)), cmp.Compare(a.s, b.s))
	})
	rows := make([]MIGRow, 0, len(keys))
	for _, k := range keys {
		r := acc[k]
		n := float64(r.Seeds)
		r.AllocatedEnd /= n
		r.AskedEnd /= n
		r.MemoryEnd /= n
		r.FailedPods /= n
		r.FailedGPUPct /= n
		r.WholeGPUs /= n
		r.SecondsPerRun /= n
		rows = append(rows, *r)
	}
	return rows
}

// fractionalAsked returns the asked share of the fractional row with the
// same trace, model and memory assumption.
func fractionalAsked(rows []MIGRow, r MIGRow) (float64, bool) {
	for _, f := range rows {
		if f.Setup == SetupFractional && f.Trace == r.Trace && f.Model == r.Model && f.Memory == r.Memory {
			return f.AskedEnd, true
		}
	}
	return math.NaN(), false
}

// WriteMIGTable writes the MIG rows as a Markdown table: what the placed
// pods hold and ask, the difference (what isolation rounds up), the asked
// share against fractional sharing on the same workload, and the failed
// requests.
func WriteMIGTable(w io.Writer, rows []MIGRow) error {
	head := "| trace | model | memory | setup | seeds | allocated % (held) | asked % (placed pods) | held − asked | memory held % | asked − fractional's | failed pods | failed GPU req % | all-7g GPUs | s/run |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
	if _, err := io.WriteString(w, head); err != nil {
		return fmt.Errorf("write MIG table: %w", err)
	}
	for _, r := range rows {
		vsFrac := ""
		if f, ok := fractionalAsked(rows, r); ok {
			vsFrac = fmt.Sprintf("%+.2f", r.AskedEnd-f)
		}
		whole := ""
		if r.WholeGPUs > 0 {
			whole = fmt.Sprintf("%.0f", r.WholeGPUs)
		}
		line := fmt.Sprintf("| %s | %s | %s | %s | %d | %.2f | %.2f | %+.2f | %.2f | %s | %.1f | %.2f | %s | %.2f |\n",
			r.Trace, r.Model, r.Memory, r.Setup, r.Seeds, r.AllocatedEnd, r.AskedEnd, r.AllocatedEnd-r.AskedEnd, r.MemoryEnd,
			vsFrac, r.FailedPods, r.FailedGPUPct, whole, r.SecondsPerRun)
		if _, err := io.WriteString(w, line); err != nil {
			return fmt.Errorf("write MIG table: %w", err)
		}
	}
	return nil
}

// WriteMIGPlot draws, per row, three bars: allocated (held), asked by the
// placed pods, and failed GPU requests (% of arrived demand), and saves the
// chart to path (the extension picks the format).
func WriteMIGPlot(path string, rows []MIGRow) error {
	if len(rows) == 0 {
		return fmt.Errorf("MIG plot %s: no MIG results", path)
	}
	labels := make([]string, len(rows))
	held := make(plotter.Values, len(rows))
	asked := make(plotter.Values, len(rows))
	failed := make(plotter.Values, len(rows))
	one := true
	for _, r := range rows[1:] {
		one = one && r.Trace == rows[0].Trace && r.Model == rows[0].Model && r.Memory == rows[0].Memory
	}
	for i, r := range rows {
		labels[i] = r.Setup
		if !one {
			labels[i] = fmt.Sprintf("%s %s %s\n%s", r.Trace, r.Model, r.Memory, r.Setup)
		}
		held[i], asked[i], failed[i] = r.AllocatedEnd, r.AskedEnd, r.FailedGPUPct
	}
	p := plot.New()
	p.Title.Text = "MIG: what isolation costs"
	if one {
		p.Title.Text += fmt.Sprintf(" (%s on %s GPUs, memory %s, %d seeds)", rows[0].Trace, rows[0].Model, rows[0].Memory, rows[0].Seeds)
	}
	p.Y.Label.Text = "% (of GPU capacity; failed: of arrived demand)"
	p.Y.Min, p.Y.Max = 0, 118 // room for the legend above the bars
	p.Add(plotter.NewGrid())
	w := vg.Points(18)
	colours := palette()
	for k, s := range []struct {
		name string
		v    plotter.Values
	}{{"allocated (held by instances)", held}, {"asked by the placed pods", asked}, {"failed GPU requests (of arrived)", failed}} {
		bars, err := plotter.NewBarChart(s.v, w)
		if err != nil {
			return fmt.Errorf("MIG plot %s: %w", path, err)
		}
		bars.LineStyle.Width = 0
		bars.Color = colours[k]
		bars.Offset = vg.Length(k-1) * w
		p.Add(bars)
		p.Legend.Add(s.name, bars)
		xy := plotter.XYLabels{XYs: make(plotter.XYs, len(s.v)), Labels: make([]string, len(s.v))}
		for i, v := range s.v {
			xy.XYs[i] = plotter.XY{X: float64(i), Y: v}
			xy.Labels[i] = fmt.Sprintf("%.1f", v)
		}
		labels, err := plotter.NewLabels(xy)
		if err != nil {
			return fmt.Errorf("MIG plot %s: %w", path, err)
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Font.Size = vg.Points(7)
			labels.TextStyle[i].XAlign = text.XCenter
		}
		labels.Offset = vg.Point{X: bars.Offset, Y: vg.Points(2)}
		p.Add(labels)
	}
	p.Legend.Top = true
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.7, float64(len(rows))-0.3 // the outer bars whole
	if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("save MIG plot %s: %w", path, err)
	}
	return nil
}
