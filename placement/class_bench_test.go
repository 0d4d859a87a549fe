package placement

import (
	"fmt"
	"image/color"
	"os"
	"reflect"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// BenchmarkClassLatency compares decisions by class with decisions node
// by node (sequential scoring, Workers: 1) on the openb-like cluster of
// BenchmarkDecisionLatency, half full, at 1,000 to 100,000 nodes. Each
// iteration asks both instances of the policy for the same pod (a 470m
// sharing pod and a 1-GPU pod in turn, alternating which goes first),
// checks that they decide the same, and applies the decision, so the
// class index follows one change per decision as in a running
// scheduler. It reports, for each pod, the median and p99 of each way in
// µs and their ratios (class over node by node: below 1 is faster), and
// the classes in the index at the end and the time to build the index
// once (what a policy pays the second time it meets a cluster). A third
// instance decides by class without remembered scores (classmemo.go):
// nomemo columns, and class/nomemo the memo's gain. Four
// untimed decisions per instance first warm the memos and draw the tie
// order. TESSERA_BENCH_PLOT=file.png (or .svg) plots the default
// policy's median and p99 by node count, both ways (latencyPlot).
func BenchmarkClassLatency(b *testing.B) {
	curves := latencyCurves{}
	defer func() {
		if path := os.Getenv("TESSERA_BENCH_PLOT"); path != "" && len(curves) > 0 {
			if err := curves.plot(path); err != nil {
				b.Fatal(err)
			}
		}
	}()
	for _, nodes := range []int{1000, 5000, 20000, 100000} {
		for _, name := range []string{"tessera", "fgd", "bestfit"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, name), func(b *testing.B) {
				c, d := openbLike(nodes)
				cls, _ := New(name, Options{Seed: 1, Typical: d, Workers: 1})
				per, _ := New(name, Options{Seed: 1, Typical: d, Workers: 1})
				chooserOf(per).class.off = true
				plain, _ := New(name, Options{Seed: 1, Typical: d, Workers: 1})
				chooserOf(plain).class.noMemo = true
				pols := []Policy{cls, per, plain}
				pods := []Pod{sharePod("share", 8000, 470), wholePod("whole", 12000, 1)}
				for k := range 4 { // draw the tie order, warm the memos
					for _, pol := range pols {
						if _, err := pol.Place(c, &pods[k%2]); err != nil {
							b.Fatal(err)
						}
					}
				}
				start := time.Now()
				newClassIndex(c, false)
				build := time.Since(start)
				times := make([][2][]time.Duration, len(pols)) // by way, by pod
				i := 0
				for b.Loop() {
					pod := &pods[i%2]
					var decs [3]Decision
					for k := range pols {
						m := (k + i/2) % len(pols)
						start := time.Now()
						dec, err := pols[m].Place(c, pod)
						times[m][i%2] = append(times[m][i%2], time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						decs[m] = dec
					}
					if !reflect.DeepEqual(decs[0], decs[1]) || !reflect.DeepEqual(decs[0], decs[2]) {
						b.Fatalf("by class %+v, node by node %+v, by class without memo %+v", decs[0], decs[1], decs[2])
					}
					if err := c.Apply(pod, decs[0]); err != nil {
						b.Fatal(err)
					}
					i++
				}
				if chooserOf(cls).classDecisions < i {
					b.Fatalf("%d of %d decisions by class", chooserOf(cls).classDecisions, i)
				}
				for k, pod := range []string{"share", "gpu1"} {
					c50, c99 := percentiles(times[0][k])
					n50, n99 := percentiles(times[1][k])
					m50, m99 := percentiles(times[2][k])
					b.ReportMetric(c50, pod+"-class-p50-µs")
					b.ReportMetric(c99, pod+"-class-p99-µs")
					b.ReportMetric(n50, pod+"-node-p50-µs")
					b.ReportMetric(n99, pod+"-node-p99-µs")
					b.ReportMetric(c50/n50, pod+"-class/node-p50")
					b.ReportMetric(c99/n99, pod+"-class/node-p99")
					b.ReportMetric(m50, pod+"-nomemo-p50-µs")
					b.ReportMetric(m99, pod+"-nomemo-p99-µs")
					b.ReportMetric(c50/m50, pod+"-class/nomemo-p50")
					if name == "tessera" {
						curves.add(pod, "by class", nodes, c50, c99)
						curves.add(pod, "node by node", nodes, n50, n99)
					}
				}
				b.ReportMetric(float64(len(chooserOf(cls).cache.ixs[0].live)), "classes")
				b.ReportMetric(float64(build.Microseconds())/1e3, "build-ms")
			})
		}
	}
}

// latencyCurves are decision latencies by node count, one curve per pod
// and way of deciding with its percentile ({"share", "by class p50"}):
// points (nodes, µs).
type latencyCurves map[[2]string]plotter.XYs

func (lc latencyCurves) add(pod, way string, nodes int, p50, p99 float64) {
	for _, q := range []struct {
		name string
		v    float64
	}{{"p50", p50}, {"p99", p99}} {
		k := [2]string{pod, way + " " + q.name}
		lc[k] = append(lc[k], plotter.XY{X: float64(nodes), Y: q.v})
	}
}

// plot draws the curves on log-log axes (µs against nodes) to path.
func (lc latencyCurves) plot(path string) error {
	p := plot.New()
	p.Title.Text = "Default policy: one decision, half-full openb-like cluster"
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = "decision latency (µs)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	colours := map[string]color.Color{
		"by class p50": color.RGBA{R: 31, G: 119, B: 180, A: 255}, "by class p99": color.RGBA{R: 44, G: 160, B: 44, A: 255},
		"node by node p50": color.RGBA{R: 214, G: 39, B: 40, A: 255}, "node by node p99": color.RGBA{R: 255, G: 127, B: 14, A: 255},
	}
	for _, pod := range []string{"share", "gpu1"} {
		for _, way := range []string{"by class p50", "by class p99", "node by node p50", "node by node p99"} {
			pts := lc[[2]string{pod, way}]
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return fmt.Errorf("plot %s %s: %w", pod, way, err)
			}
			line.Color, points.Color = colours[way], colours[way]
			if pod == "gpu1" {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			label := map[string]string{"share": "470m share", "gpu1": "1 GPU"}[pod] + ", " + way
			p.Add(line, points)
			p.Legend.Add(label, line, points)
		}
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}
