package tracesim

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// maxPlotPoints bounds the points of one line in a plot over time; longer
// series are thinned to every n-th sample (the last one kept).
const maxPlotPoints = 2000

// DynamicPlotName is the file WriteDynamicPlots writes for a trace and
// seed.
func DynamicPlotName(trace string, seed uint64) string {
	return fmt.Sprintf("dynamic_%s_seed%d.svg", trace, seed)
}

// WriteDynamicPlots draws, for each trace and seed, GPU allocation (% of
// capacity) and waiting pods over simulated time, one line per policy,
// and writes them as SVG into dir (DynamicPlotName). With queues, a row
// of the same two panels follows for each queue. It returns the files
// written, sorted.
func WriteDynamicPlots(dir string, rs []*DynamicResult) ([]string, error) {
	type key struct {
		trace string
		seed  uint64
	}
	groups := map[key][]*DynamicResult{}
	var keys []key
	for _, r := range rs {
		k := key{r.Trace, r.Seed}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.trace, b.trace), cmp.Compare(a.seed, b.seed)) })
	var paths []string
	for _, k := range keys {
		path := filepath.Join(dir, DynamicPlotName(k.trace, k.seed))
		if err := writeDynamicPlot(path, fmt.Sprintf("%s, seed %d", k.trace, k.seed), groups[k]); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// WriteDynamicPlot draws one plot file of WriteDynamicPlots for the runs
// given (one line each) under a title: SVG, or PNG when path ends in
// .png.
func WriteDynamicPlot(path, title string, rs []*DynamicResult) error {
	if len(rs) == 0 {
		return fmt.Errorf("plot %s: no runs", path)
	}
	return writeDynamicPlot(path, title, rs)
}

func writeDynamicPlot(path, title string, rs []*DynamicResult) error {
	plots, err := dynamicPlots(title, rs)
	if err != nil {
		return err
	}
	rows := len(plots)
	w, h := 11*vg.Inch, vg.Length(rows)*3.2*vg.Inch
	var img io.WriterTo
	if strings.EqualFold(filepath.Ext(path), ".png") {
		c := vgimg.New(w, h)
		drawTiles(draw.New(c), plots)
		img = vgimg.PngCanvas{Canvas: c}
	} else {
		c := vgsvg.New(w, h)
		drawTiles(draw.New(c), plots)
		img = c
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save plot: %w", err)
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}

// drawTiles draws rows of plots, aligned, onto dc.
func drawTiles(dc draw.Canvas, plots [][]*plot.Plot) {
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for row := range plots {
		for col := range plots[row] {
			plots[row][col].Draw(canvases[row][col])
		}
	}
}

// dynamicPlots are the panels of one plot file: a row for all pods, then
// one per queue; allocation on the left, waiting pods on the right.
func dynamicPlots(title string, rs []*DynamicResult) ([][]*plot.Plot, error) {
	var queues []string
	for _, q := range rs[0].Queues {
		queues = append(queues, q.Queue)
	}
	rows := 1 + len(queues)
	plots := make([][]*plot.Plot, rows)
	for row := range plots {
		scope := "all pods"
		if row > 0 {
			scope = "queue " + queues[row-1]
		}
		alloc, wait := plot.New(), plot.New()
		alloc.Title.Text = fmt.Sprintf("%s: GPU allocated (%s)", title, scope)
		alloc.Y.Label.Text = "allocated GPU (% of capacity)"
		alloc.Y.Min, alloc.Y.Max = 0, 100
		wait.Title.Text = fmt.Sprintf("%s: waiting pods (%s)", title, scope)
		wait.Y.Label.Text = "waiting pods"
		wait.Y.Min = 0
		for _, p := range []*plot.Plot{alloc, wait} {
			p.X.Label.Text = "simulated time (s)"
			p.Add(plotter.NewGrid())
			p.Title.TextStyle.Font.Size = vg.Points(9)
			p.Legend.Top = true
			p.Legend.TextStyle.Font.Size = vg.Points(8)
			p.Legend.ThumbnailWidth = vg.Points(20)
		}
		colours := palette()
		for i, r := range rs {
			a, w := seriesPoints(r, row-1)
			for j, pts := range []plotter.XYs{a, w} {
				line, err := plotter.NewLine(pts)
				if err != nil {
					return nil, fmt.Errorf("plot %s %s: %w", r.Trace, r.Policy, err)
				}
				line.StepStyle = plotter.PostStep
				line.Color = colours[i%len(colours)]
				line.Width = vg.Points(1)
				if i >= len(colours) {
					line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
				}
				p := alloc
				if j == 1 {
					p = wait
				}
				p.Add(line)
				p.Legend.Add(r.Policy, line)
			}
		}
		plots[row] = []*plot.Plot{alloc, wait}
	}
	// The end of the arrival window (over which allocation is averaged),
	// as a dashed vertical line.
	var window, most float64
	for _, r := range rs {
		window = max(window, r.Window)
		for _, s := range r.Series {
			most = max(most, float64(s.Waiting))
		}
	}
	for _, row := range plots {
		for col, p := range row {
			top := 100.0
			if col == 1 {
				top = max(1, most)
			}
			mark, err := plotter.NewLine(plotter.XYs{{X: window, Y: 0}, {X: window, Y: top}})
			if err != nil {
				return nil, err
			}
			mark.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			mark.Color = color.Gray{Y: 120}
			p.Add(mark)
			p.Legend.Add("last arrival", mark)
		}
	}
	return plots, nil
}

// seriesPoints returns a run's allocation and waiting pods over time, for
// queue q (by index), or for the whole cluster when q < 0; thinned to at
// most about maxPlotPoints.
func seriesPoints(r *DynamicResult, q int) (alloc, waiting plotter.XYs) {
	stride := max(1, (len(r.Series)+maxPlotPoints-1)/maxPlotPoints)
	for i, s := range r.Series {
		if i%stride != 0 && i != len(r.Series)-1 {
			continue
		}
		a, w := s.AllocatedPct, float64(s.Waiting)
		if q >= 0 && q < len(s.Queues) {
			a, w = s.Queues[q].AllocatedPct, float64(s.Queues[q].Waiting)
		}
		alloc = append(alloc, plotter.XY{X: s.Time, Y: a})
		waiting = append(waiting, plotter.XY{X: s.Time, Y: w})
	}
	return alloc, waiting
}
