package termview

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/webui"
)

var now = time.Date(2026, 11, 26, 4, 12, 5, 0, time.UTC)

func at(d time.Duration) *time.Time { t := now.Add(-d); return &t }
func ptr[T any](v T) *T             { return &v }

// host is a snapshot as the daemon sends it (summarized, sorted): two
// H200s, job-3 running on GPU 0 (0.5 guaranteed, limit 0.8, 20Gi cap,
// 3Gi used), job-4 waiting, job-1 finished.
func host() webui.Snapshot {
	s := webui.Snapshot{
		Scope: "host", Title: "Tessera host", Source: "sim:2xH200 (simulated)", Time: now,
		Notes: []string{`Simulated GPUs: utilisation is not measured, so the measured columns say "not metered".`},
		GPUs: []webui.GPU{
			{Node: "gpu-box", Index: 0, UUID: "GPU-0", Model: "H200", MemoryMiB: 143771, MemoryBookedMiB: 20480, GuaranteedMilli: 500, LimitMilli: 800,
				Shares: []webui.Share{{Workload: "job-3", Queue: "research", GuaranteedMilli: 500, LimitMilli: 800, MemoryMiB: 20480, MemoryLimitMiB: 20480, MemoryUsedMiB: ptr(int64(3072)),
					Arbiter: &webui.ArbiterSeat{Phase: "active", GrantedMilli: 650}}}},
			{Node: "gpu-box", Index: 1, UUID: "GPU-1", Model: "H200", MemoryMiB: 143771, Shares: []webui.Share{}},
		},
		Pending: []webui.Pending{{Position: 1, ID: "job-4", Queue: "default", Request: "2 GPU", Reason: "waiting for GPU capacity: needs 2 whole GPUs, 1 is free", Submitted: now.Add(-45 * time.Second)}},
		Workloads: []webui.Workload{
			{ID: "job-1", State: "succeeded", Queue: "default", Request: "1 GPU", GPUs: []webui.WorkloadGPU{{Index: 1, GuaranteedMilli: 1000, LimitMilli: 1000}}, Node: "gpu-box",
				Submitted: now.Add(-3 * time.Hour), Started: at(3 * time.Hour), Finished: at(time.Hour - 7*time.Minute), ExitCode: ptr(0)},
			{ID: "job-3", State: "running", Queue: "research", Request: "1x 0.5 GPU (limit 0.8) 20Gi", GPUs: []webui.WorkloadGPU{{Index: 0, GuaranteedMilli: 500, LimitMilli: 800}}, Node: "gpu-box",
				Submitted: now.Add(-185 * time.Second), Started: at(185 * time.Second)},
			{ID: "job-4", State: "queued", Queue: "default", Request: "2 GPU", Submitted: now.Add(-45 * time.Second), Reason: "waiting for GPU capacity: needs 2 whole GPUs, 1 is free"},
		},
	}
	s.Summarize()
	s.Trim(-1)
	return s
}

// jobIDs are the job table's first column, top to bottom.
func jobIDs(screen string) []string {
	var ids []string
	in := false
	for _, l := range strings.Split(screen, "\n") {
		switch {
		case strings.HasPrefix(l, "JOB "):
			in = true
		case in && (l == "" || strings.HasPrefix(l, "+") || strings.HasPrefix(l, "q quit")):
			in = false
		case in:
			ids = append(ids, strings.Fields(l)[0])
		}
	}
	return ids
}

// row is the screen's line that starts with first (then two spaces).
func row(screen, first string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(l, first+" ") {
			return l
		}
	}
	return ""
}

func TestRender(t *testing.T) {
	many := host()
	for i := range 30 {
		many.Workloads = append(many.Workloads, webui.Workload{ID: fmt.Sprintf("job-%d", 100+i), State: "failed", Queue: "default", Request: "1 GPU",
			Submitted: now.Add(-time.Duration(i+10) * time.Minute), Started: at(time.Duration(i+10) * time.Minute), Finished: at(time.Duration(i+5) * time.Minute), ExitCode: ptr(1)})
	}
	many.Summarize()
	many.Trim(-1)

	metered := host()
	metered.GPUs[0].SetUse(gpuuse.Use{Source: gpuuse.Measured, BusyMilli: ptr(int64(650))})
	metered.GPUs[0].Shares[0].Use = &gpuuse.Use{Source: gpuuse.Measured, BusyMilli: ptr(int64(650))}
	metered.Notes = nil
	metered.Summarize()

	simulated := host()
	simulated.GPUs[0].SetUse(gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: ptr(int64(20))})
	simulated.GPUs[0].Shares[0].Use = &gpuuse.Use{Source: gpuuse.Simulated, BusyMilli: ptr(int64(20))}
	simulated.GPUs[0].Shares[0].Idle = &gpuuse.Idle{Since: now.Add(-12 * time.Minute)}
	for i := range simulated.Workloads {
		if simulated.Workloads[i].ID == "job-3" {
			simulated.Workloads[i].Idle = simulated.GPUs[0].Shares[0].Idle
		}
	}
	simulated.Summarize()

	twoNodes := host()
	twoNodes.GPUs[1].Node = "other-box"
	twoNodes.Workloads[2].Node = "other-box" // job-1 ran on GPU 1
	twoNodes.Summarize()

	hostile := host()
	hostile.Workloads[1].Reason = "evil\x1b]0;pwned\x07\x1b[31mred\nline"
	hostile.Source = "sim\x1b[2J"

	tests := []struct {
		name string
		s    webui.Snapshot
		v    View
		// want are substrings of the screen, rows maps a row's first
		// cell to substrings of that row, ids is the job table's order.
		want    []string
		notWant []string
		rows    map[string][]string
		ids     []string
	}{
		{
			name: "whole host, no limits",
			s:    host(),
			v:    View{Now: now},
			want: []string{
				"04:12:05  Tessera host gpu-box · 2 GPUs · 1 running · 1 waiting · sim:2xH200 (simulated)",
				"guaranteed 0.5/2 GPU (25%) · burst limit 0.8 · used not metered · memory booked 20Gi/280.8Gi (7%)",
				"note: Simulated GPUs: utilisation is not measured",
				"GPUs · 2× H200",
				"Jobs · 3 of 3 · filter all · sort newest",
			},
			rows: map[string][]string{
				"0":     {"H200", "██████████▒▒▒▒▒▒░░░░ 0.5 of 1", "0.8", "not metered", "███░░░░░░░░░░░░░░░░░ 20Gi of 140.4Gi", "job-3"},
				"1":     {"H200", "░░░░░░░░░░░░░░░░░░░░ 0 of 1", "not metered", "0Mi of 140.4Gi", "  -"},
				"job-3": {"running", "research", "  0  ", "0.5/0.8", "3Gi/20Gi", "running 3m 05s", "  -"},
				"job-4": {"waiting", "default", "  -  ", "2 GPU", "waiting 45s", "waiting for GPU capacity: needs 2 whole GPUs, 1 is free"},
				"job-1": {"succeeded", "  1  ", "1/1", "ran 2h 07m", "exit 0"},
			},
			ids: []string{"job-4", "job-3", "job-1"},
		},
		{
			name: "metered GPU shows its measured use",
			s:    metered,
			v:    View{Now: now},
			want: []string{"used 0.65 measured ·"},
			rows: map[string][]string{"0": {"0.8    0.65 measured  "}, "1": {"not metered"}, "job-3": {"running  ", "0.5/0.8      0.65 measured  3Gi/20Gi"}},
		},
		{
			name:    "simulated use is labelled simulated, and an idle holder is marked",
			s:       simulated,
			v:       View{Now: now},
			want:    []string{"used 0.02 simulated ·"},
			notWant: []string{"0.02 measured"},
			rows:    map[string][]string{"0": {"0.8    0.02 simulated  "}, "job-3": {"running, idle since 04:00", "0.02 simulated"}},
		},
		{
			name: "GPUs on two nodes are named by node",
			s:    twoNodes,
			v:    View{Now: now},
			want: []string{"Tessera host (2 nodes) ·"},
			rows: map[string][]string{"gpu-box/0": {"job-3"}, "other-box/1": {"0 of 1"}, "job-3": {"gpu-box/0", "0.5/0.8"}, "job-1": {"other-box/1"}},
		},
		{
			name: "running only",
			s:    many,
			v:    View{Now: now, Filter: FilterRunning},
			want: []string{"Jobs · 1 of 33 · filter running"},
			ids:  []string{"job-3"},
		},
		{
			name: "waiting only",
			s:    many,
			v:    View{Now: now, Filter: FilterWaiting},
			ids:  []string{"job-4"},
		},
		{
			name: "live jobs by state",
			s:    host(),
			v:    View{Now: now, Filter: FilterLive, Sort: SortState},
			ids:  []string{"job-3", "job-4"},
		},
		{
			name: "a filter nothing matches says so",
			s:    func() webui.Snapshot { s := host(); s.Workloads = s.Workloads[:1]; return s }(),
			v:    View{Now: now, Filter: FilterRunning},
			want: []string{"Jobs · 0 of 1 · filter running", "\nno job matches the filter running (f: next filter)"},
		},
		{
			name: "sort by queue",
			s:    host(),
			v:    View{Now: now, Sort: SortQueue},
			ids:  []string{"job-4", "job-1", "job-3"},
		},
		{
			name: "sort by GPU, waiting jobs last",
			s:    host(),
			v:    View{Now: now, Sort: SortGPU},
			ids:  []string{"job-3", "job-1", "job-4"},
		},
		{
			name: "sort by duration",
			s:    host(),
			v:    View{Now: now, Sort: SortLongest},
			ids:  []string{"job-1", "job-3", "job-4"},
		},
		{
			name: "cut to the terminal's height",
			s:    many,
			v:    View{Now: now, Width: 200, Height: 24, Footer: "q quit"},
			want: []string{"+22 more jobs\nq quit"},
			ids:  []string{"job-4", "job-3", "job-100", "job-101", "job-102", "job-103", "job-104", "job-105", "job-106", "job-107", "job-108"},
		},
		{
			name: "short terminal: no blank lines, the jobs keep three rows",
			s:    many,
			v:    View{Now: now, Width: 200, Height: 13},
			want: []string{"+30 more jobs"},
			ids:  []string{"job-4", "job-3", "job-100"},
		},
		{
			name:    "narrow terminal: long lines end in an ellipsis",
			s:       host(),
			v:       View{Now: now, Width: 72, Height: 40},
			want:    []string{"…"},
			notWant: []string{"1 is free"},
			ids:     []string{"job-4", "job-3", "job-1"},
		},
		{
			name:    "80 columns: the reason keeps room, the memory and queue columns go",
			s:       host(),
			v:       View{Now: now, Width: 80, Height: 40},
			notWant: []string{"MEMORY USED/CAP", "QUEUE", "MODEL"},
			rows:    map[string][]string{"job-4": {"waiting", "2 GPU", "waiting for GPU capacity"}, "job-3": {"0.5/0.8"}},
		},
		{
			name:    "control characters from the daemon never reach the terminal",
			s:       hostile,
			v:       View{Now: now},
			want:    []string{`evil\x1b]0;pwned\a\x1b[31mred\nline`, `sim\x1b[2J`},
			notWant: []string{"\x1b", "\x07"},
		},
		{
			name: "no GPUs and no jobs",
			s:    webui.Snapshot{Title: "Tessera host", Source: "local"},
			v:    View{Now: now},
			want: []string{"04:12:05  Tessera host · 0 GPUs · 0 running · 0 waiting · local", "GPUs · none", "\nno GPUs\n", "\nno jobs yet"},
		},
		{
			name: "older finished jobs the daemon left out are counted",
			s:    func() webui.Snapshot { s := host(); s.WorkloadsOmitted = 7; return s }(),
			v:    View{Now: now},
			want: []string{"· and 7 older finished ones the daemon did not send"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			screen := Render(tt.s, tt.v)
			for _, w := range tt.want {
				if !strings.Contains(screen, w) {
					t.Errorf("screen lacks %q:\n%s", w, screen)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(screen, w) {
					t.Errorf("screen has %q:\n%s", w, screen)
				}
			}
			for first, parts := range tt.rows {
				r := row(screen, first)
				for _, p := range parts {
					if !strings.Contains(r, p) {
						t.Errorf("row %s = %q, lacks %q:\n%s", first, r, p, screen)
					}
				}
			}
			if tt.ids != nil {
				if got := jobIDs(screen); !slices.Equal(got, tt.ids) {
					t.Errorf("job order %v, want %v:\n%s", got, tt.ids, screen)
				}
			}
			lines := strings.Split(screen, "\n")
			if tt.v.Height > 0 && len(lines) > tt.v.Height {
				t.Errorf("%d lines on a terminal of %d:\n%s", len(lines), tt.v.Height, screen)
			}
			for _, l := range lines {
				if tt.v.Width > 0 && ansi.StringWidth(l) > tt.v.Width {
					t.Errorf("line of %d cells on a terminal of %d: %q", ansi.StringWidth(l), tt.v.Width, l)
				}
			}
		})
	}
}

// Render never writes more lines or wider lines than the terminal has,
// at any size, and keeps the footer as the last line.
func TestRenderFitsAnySize(t *testing.T) {
	s := host()
	for i := range 40 {
		s.GPUs = append(s.GPUs, webui.GPU{Node: "gpu-box", Index: i + 2, Model: "H200", MemoryMiB: 143771, Shares: []webui.Share{}})
		s.Workloads = append(s.Workloads, webui.Workload{ID: fmt.Sprintf("job-%d", 100+i), State: "queued", Queue: "default", Request: "1 GPU", Submitted: now.Add(-time.Minute), Reason: "behind job-4"})
	}
	s.Summarize()
	s.Trim(-1)
	for _, w := range []int{1, 10, 40, 80, 120, 200} {
		for h := 1; h <= 60; h++ {
			screen := Render(s, View{Width: w, Height: h, Now: now, Footer: "FOOTER"})
			lines := strings.Split(screen, "\n")
			if len(lines) > h {
				t.Fatalf("%dx%d: %d lines", w, h, len(lines))
			}
			if last := lines[len(lines)-1]; !strings.HasPrefix("FOOTER", strings.TrimSuffix(last, "…")) {
				t.Fatalf("%dx%d: last line %q, want the footer", w, h, last)
			}
			for _, l := range lines {
				if ansi.StringWidth(l) > w {
					t.Fatalf("%dx%d: line %q is %d wide", w, h, l, ansi.StringWidth(l))
				}
			}
			// A cut job table says by how much: the rows shown and the
			// "+N more" add up to all of them.
			if h >= 20 && w >= 80 {
				shown := len(jobIDs(screen))
				more := 0
				for _, l := range lines {
					if n, ok := strings.CutSuffix(l, " more jobs"); ok {
						fmt.Sscanf(n, "+%d", &more)
					}
				}
				if shown+more != len(s.Workloads) {
					t.Fatalf("%dx%d: %d jobs shown and %d more, of %d:\n%s", w, h, shown, more, len(s.Workloads), screen)
				}
			}
		}
	}
}

func TestFit(t *testing.T) {
	tests := []struct {
		gpus, jobs, avail  int
		wantGPUs, wantJobs int
	}{
		{2, 3, 10, 2, 3},
		{8, 20, 14, 8, 5},  // all GPUs; 5 jobs and "+15 more"
		{64, 20, 14, 9, 3}, // 9 GPUs and "+55 more"; 3 jobs and "+17 more"
		{64, 2, 14, 11, 2},
		{1, 6, 4, 1, 2}, // one GPU: its row, not "+1 more GPU" in its place
		{3, 3, 5, 1, 3}, // one GPU and "+2 more GPUs"; the three jobs
		{1, 1, 0, 1, 1}, // no room at all: Render cuts the frame
	}
	for _, tt := range tests {
		g, j := fit(tt.gpus, tt.jobs, tt.avail)
		if g != tt.wantGPUs || j != tt.wantJobs {
			t.Errorf("fit(%d, %d, %d) = %d, %d; want %d, %d", tt.gpus, tt.jobs, tt.avail, g, j, tt.wantGPUs, tt.wantJobs)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 45 * time.Second: "45s", 185 * time.Second: "3m 05s",
		2*time.Hour + 7*time.Minute: "2h 07m", 76 * time.Hour: "3d 4h",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestParseSortAndFilter(t *testing.T) {
	for _, s := range Sorts() {
		if got, err := ParseSort(s.String()); err != nil || got != s {
			t.Errorf("ParseSort(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseSort("cost"); err == nil || err.Error() != `must be one of newest, state, queue, gpu, longest, got "cost"` {
		t.Errorf("ParseSort(cost): %v", err)
	}
	if _, err := ParseFilter("done"); err == nil || err.Error() != `must be one of all, live, running, waiting, finished, got "done"` {
		t.Errorf("ParseFilter(done): %v", err)
	}
	if SortLongest.Next() != SortNewest || FilterFinished.Next() != FilterAll || FilterAll.Next() != FilterLive {
		t.Error("the keys do not cycle")
	}
}
