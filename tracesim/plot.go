package tracesim

import (
	"cmp"
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WritePlot draws allocation against arrived workload, one line per trace
// and policy (the mean over seeds), and saves it to path; the extension
// (.png, .svg, .pdf) picks the format.
func WritePlot(path string, results []*Result) error {
	return writePlot(path, results, [4]float64{0, 130, 0, 100})
}

// WriteZoomPlot is WritePlot restricted to the saturated end of the run
// (arrived 80..130%, allocated 80..100%), where policies differ.
func WriteZoomPlot(path string, results []*Result) error {
	return writePlot(path, results, [4]float64{80, 130, 80, 100})
}

func writePlot(path string, results []*Result, box [4]float64) error {
	type key struct{ t, p string }
	sum := map[key][]float64{}
	n := map[key][]int{}
	var keys []key
	for _, r := range results {
		k := key{r.Trace, r.Policy}
		if _, ok := sum[k]; !ok {
			keys = append(keys, k)
		}
		for len(sum[k]) < len(r.Curve) {
			sum[k] = append(sum[k], 0)
			n[k] = append(n[k], 0)
		}
		for i, pt := range r.Curve {
			sum[k][i] += pt.AllocatedPct
			n[k][i]++
		}
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.p, b.p)) })
	traces := map[string]bool{}
	for _, k := range keys {
		traces[k.t] = true
	}

	p := plot.New()
	p.Title.Text = "GPU allocation vs arrived workload"
	p.X.Label.Text = "arrived GPU demand (% of capacity)"
	p.Y.Label.Text = "allocated GPU (% of capacity)"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	ideal := plotter.NewFunction(func(x float64) float64 { return min(x, 100) })
	ideal.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	ideal.Color = color.Gray{Y: 160}
	p.Add(ideal)
	for i, k := range keys {
		pts := make(plotter.XYs, 0, len(sum[k]))
		for x := range sum[k] {
			if n[k][x] > 0 && float64(x) >= box[0] {
				pts = append(pts, plotter.XY{X: float64(x), Y: sum[k][x] / float64(n[k][x])})
			}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s/%s: %w", k.t, k.p, err)
		}
		colours := palette()
		line.Color = colours[i%len(colours)]
		line.Width = vg.Points(1.2)
		if i >= len(colours) {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		label := k.p
		if len(traces) > 1 {
			label = k.t + " " + k.p
		}
		p.Add(line)
		p.Legend.Add(label, line)
	}
	p.X.Min, p.X.Max = box[0], box[1]
	p.Y.Min, p.Y.Max = box[2], box[3]
	w, h := 8*vg.Inch, 5*vg.Inch
	if strings.EqualFold(filepath.Ext(path), ".png") {
		w, h = 10*vg.Inch, 6*vg.Inch
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	if err := p.Save(w, h, path); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}

// palette returns the line colours, in order.
func palette() []color.Color {
	return []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255},
		color.RGBA{R: 255, G: 127, B: 14, A: 255},
		color.RGBA{R: 44, G: 160, B: 44, A: 255},
		color.RGBA{R: 214, G: 39, B: 40, A: 255},
		color.RGBA{R: 148, G: 103, B: 189, A: 255},
		color.RGBA{R: 140, G: 86, B: 75, A: 255},
		color.RGBA{R: 227, G: 119, B: 194, A: 255},
		color.RGBA{R: 127, G: 127, B: 127, A: 255},
		color.RGBA{R: 188, G: 189, B: 34, A: 255},
		color.RGBA{R: 23, G: 190, B: 207, A: 255},
	}
}
