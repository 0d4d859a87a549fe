package termview

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/internal/termsafe"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/webui"
)

// View says how to draw a Snapshot: the terminal's size, the time the
// durations count to, and the job table's order and filter.
type View struct {
	// Width and Height are the terminal's size in cells and lines; 0 or
	// less: no limit (every line whole, every job listed).
	Width, Height int
	// Now is the time durations count to and the header shows.
	Now time.Time
	Sort
	Filter
	// Footer, when set, is the last line (the keys, a failed refresh).
	Footer string
}

// Sort orders the job table.
type Sort int

// The job table's orders; Sorts lists them in the order the s key cycles.
const (
	// SortNewest is the page's order: running and waiting jobs first,
	// then finished ones, newest submitted first within each.
	SortNewest Sort = iota
	// SortState: running jobs, then waiting ones, then finished ones;
	// newest first within each.
	SortState
	// SortQueue: by queue name, then newest first.
	SortQueue
	// SortGPU: by the first GPU a job holds or held (jobs without one
	// last), then newest first.
	SortGPU
	// SortLongest: the longest running, waiting or run first.
	SortLongest
)

// Sorts are the orders, in the order the s key cycles through them.
func Sorts() []Sort { return []Sort{SortNewest, SortState, SortQueue, SortGPU, SortLongest} }

func (s Sort) String() string {
	switch s {
	case SortNewest:
		return "newest"
	case SortState:
		return "state"
	case SortQueue:
		return "queue"
	case SortGPU:
		return "gpu"
	case SortLongest:
		return "longest"
	}
	return fmt.Sprintf("Sort(%d)", int(s))
}

// Next is the order after s, cycling.
func (s Sort) Next() Sort { return next(Sorts(), s) }

// ParseSort reads a Sort's name.
func ParseSort(name string) (Sort, error) { return parse(Sorts(), name) }

// Filter chooses the jobs the table lists, by state (as the page's state
// filter does).
type Filter int

// The job table's filters, in the order the f key cycles.
const (
	FilterAll Filter = iota
	// FilterLive: running or waiting.
	FilterLive
	FilterRunning
	FilterWaiting
	FilterFinished
)

// Filters are the filters, in the order the f key cycles through them.
func Filters() []Filter {
	return []Filter{FilterAll, FilterLive, FilterRunning, FilterWaiting, FilterFinished}
}

func (f Filter) String() string {
	switch f {
	case FilterAll:
		return "all"
	case FilterLive:
		return "live"
	case FilterRunning:
		return "running"
	case FilterWaiting:
		return "waiting"
	case FilterFinished:
		return "finished"
	}
	return fmt.Sprintf("Filter(%d)", int(f))
}

// Next is the filter after f, cycling.
func (f Filter) Next() Filter { return next(Filters(), f) }

// ParseFilter reads a Filter's name.
func ParseFilter(name string) (Filter, error) { return parse(Filters(), name) }

// next is the value after v in all, cycling (the first for one not in all).
func next[T comparable](all []T, v T) T {
	return all[(slices.Index(all, v)+1)%len(all)]
}

// parse finds the value of all named name.
func parse[T fmt.Stringer](all []T, name string) (T, error) {
	names := make([]string, len(all))
	for i, v := range all {
		if v.String() == name {
			return v, nil
		}
		names[i] = v.String()
	}
	var zero T
	return zero, fmt.Errorf("must be one of %s, got %q", strings.Join(names, ", "), name)
}

func (f Filter) keeps(w webui.Workload) bool {
	switch f {
	case FilterLive:
		return w.Live()
	case FilterRunning:
		return w.State == webui.StateRunning
	case FilterWaiting:
		return w.State == webui.StateQueued
	case FilterFinished:
		return !w.Live()
	}
	return true
}

// The bar's cells: guaranteed, up to the burst limit, free.
const (
	cellFull  = "█"
	cellBurst = "▒"
	cellFree  = "░"
)

// Render draws s as a screen of v.Width by v.Height (see View) and returns
// it without a final newline.
func Render(s webui.Snapshot, v View) string {
	var top []string
	top = append(top, headerLine(s, v.Now), totalsLine(s.Totals))
	for _, n := range s.Notes {
		top = append(top, "note: "+clean(n))
	}
	gpuTitle, gpuHead, gpuRows := gpuTable(s, v.Width)
	jobs := jobsOf(s, v)
	jobTitle, jobHead, jobRows := jobTable(s, jobs, v)

	var footer []string
	if v.Footer != "" {
		footer = append(footer, clean(v.Footer))
	}
	// What the two tables may take: all of it without a height, else
	// what the header, titles, column heads and footer leave (a blank
	// line before each title when there is room for both).
	blank := v.Height <= 0 || v.Height >= 20
	fixed := len(top) + 4 + len(footer)
	if blank {
		fixed += 2
	}
	gpuShown, jobShown := len(gpuRows), len(jobRows)
	if v.Height > 0 {
		avail := max(v.Height-fixed, 0)
		gpuShown, jobShown = fit(len(gpuRows), len(jobRows), avail)
	}

	lines := top
	section := func(title, head string, rows []string, shown int, more string) {
		if blank {
			lines = append(lines, "")
		}
		lines = append(lines, title, head)
		lines = append(lines, rows[:shown]...)
		if shown < len(rows) {
			lines = append(lines, "+"+plural(len(rows)-shown, "more "+more))
		}
	}
	section(gpuTitle, gpuHead, gpuRows, gpuShown, "GPU")
	section(jobTitle, jobHead, jobRows, jobShown, "job")
	lines = append(lines, footer...)
	if v.Height > 0 && len(lines) > v.Height {
		// Too short even for the header: keep the top, and the footer.
		kept := lines[:max(v.Height-len(footer), 0)]
		lines = append(slices.Clip(kept), footer...)[:v.Height]
	}
	if v.Width > 0 {
		for i, l := range lines {
			lines[i] = ansi.Truncate(l, v.Width, "…")
		}
	}
	return strings.Join(lines, "\n")
}

// fit shares avail lines between nG GPU rows and nJ job rows: the jobs
// keep at least min(nJ, 3) rows and a "+N more" line; the GPUs take what
// they need of the rest (with a "+N more" line when cut); the jobs take
// what is left. It returns how many rows of each to show.
func fit(nG, nJ, avail int) (gpus, jobs int) {
	if nG+nJ <= avail {
		return nG, nJ
	}
	reserve := min(nJ, 4)
	gpus = nG
	if nG > avail-reserve {
		gpus = cut(nG, avail-reserve)
	}
	gpuLines := gpus
	if gpus < nG {
		gpuLines++
	}
	return gpus, cut(nJ, avail-gpuLines)
}

// cut is how many of n rows to show in lines lines, one of them the
// "+N more" line when not all fit. A single row with no room is shown
// rather than a "+1 more" line in its place (Render cuts what overflows).
func cut(n, lines int) int {
	if n <= lines {
		return n
	}
	shown := max(lines-1, 0)
	if shown+1 == n {
		return n
	}
	return shown
}

func headerLine(s webui.Snapshot, now time.Time) string {
	title := cmp.Or(s.Title, "Tessera")
	nodes := nodeNames(s.GPUs)
	switch len(nodes) {
	case 0:
	case 1:
		title += " " + nodes[0]
	default:
		title += fmt.Sprintf(" (%d nodes)", len(nodes))
	}
	t := s.Totals
	parts := []string{now.Format("15:04:05") + "  " + clean(title), plural(t.GPUs, "GPU"), fmt.Sprintf("%d running", t.Running), fmt.Sprintf("%d waiting", t.Waiting)}
	if s.Source != "" {
		parts = append(parts, clean(s.Source))
	}
	return strings.Join(parts, " · ")
}

// totalsLine is the page's overview cards in one line.
func totalsLine(t webui.Totals) string {
	measured := usedText(t.MeasuredMilli, t.SimulatedMilli)
	return fmt.Sprintf("guaranteed %s/%s GPU (%s) · burst limit %s · used %s · memory booked %s/%s (%s)",
		quantity.FormatShare(t.GuaranteedMilli), quantity.FormatShare(t.CapacityMilli), pct(t.GuaranteedMilli, t.CapacityMilli),
		quantity.FormatShare(t.LimitMilli), measured,
		mib(t.MemoryBookedMiB), mib(t.MemoryMiB), pct(t.MemoryBookedMiB, t.MemoryMiB))
}

func gpuTable(s webui.Snapshot, width int) (title, head string, rows []string) {
	bar := barWidth(width)
	models := make([]string, 0, len(s.Models))
	for _, m := range s.Models {
		models = append(models, fmt.Sprintf("%d× %s", m.GPUs, clean(m.Model)))
	}
	title = "GPUs · " + cmp.Or(strings.Join(models, ", "), "none") + " · " + cellFull + " guaranteed " + cellBurst + " up to the burst limit " + cellFree + " free"
	multi := len(nodeNames(s.GPUs)) > 1
	cells := [][]string{{"GPU", "MODEL", "GUARANTEED", "LIMIT", "USED", "MEMORY BOOKED", "JOBS"}}
	for _, g := range s.GPUs {
		measured := usedText(g.MeasuredMilli, g.SimulatedMilli)
		jobs := make([]string, 0, len(g.Shares))
		for _, sh := range g.Shares {
			jobs = append(jobs, clean(sh.Workload))
		}
		cells = append(cells, []string{
			gpuName(g.Node, g.Index, multi),
			clean(g.Model),
			computeBar(g.GuaranteedMilli, g.LimitMilli, bar) + " " + quantity.FormatShare(g.GuaranteedMilli) + " of 1",
			quantity.FormatShare(g.LimitMilli),
			measured,
			memoryBar(g.MemoryBookedMiB, g.MemoryMiB, bar) + " " + mib(g.MemoryBookedMiB) + " of " + mib(g.MemoryMiB),
			cmp.Or(strings.Join(jobs, ","), "-"),
		})
	}
	// Narrow: the models are in the title; the memory, the measured grant
	// and the limit go before the guaranteed booking.
	lines := columns(cells, width, 8, 1, 5, 4, 3)
	if len(s.GPUs) == 0 {
		lines = append(lines, "no GPUs")
	}
	return title, lines[0], lines[1:]
}

// usedText is a use figure with its source ("0.42 measured", "0.3
// simulated": never one for the other), or "not metered".
func usedText(measured, simulated *int64) string {
	switch {
	case measured != nil:
		return quantity.FormatShare(*measured) + " measured"
	case simulated != nil:
		return quantity.FormatShare(*simulated) + " simulated"
	}
	return "not metered"
}

// shareUse is a share's use as the job table shows it.
func shareUse(sh webui.Share) string {
	if sh.Use == nil || sh.Use.BusyMilli == nil {
		return "not metered"
	}
	if sh.Use.Source == gpuuse.Simulated {
		return usedText(nil, sh.Use.BusyMilli)
	}
	return usedText(sh.Use.BusyMilli, nil)
}

// jobsOf is the job table's rows: s's workloads that v's filter keeps, in
// v's order.
func jobsOf(s webui.Snapshot, v View) []webui.Workload {
	var ws []webui.Workload
	for _, w := range s.Workloads {
		if v.Filter.keeps(w) {
			ws = append(ws, w)
		}
	}
	webui.SortWorkloads(ws)
	stateRank := func(w webui.Workload) int {
		switch w.State {
		case webui.StateRunning:
			return 0
		case webui.StateQueued:
			return 1
		}
		return 2
	}
	firstGPU := func(w webui.Workload) (bool, string, int) {
		if len(w.GPUs) == 0 {
			return true, "", 0
		}
		return false, w.Node, w.GPUs[0].Index
	}
	var by func(a, b webui.Workload) int
	switch v.Sort {
	case SortState:
		by = func(a, b webui.Workload) int { return cmp.Compare(stateRank(a), stateRank(b)) }
	case SortQueue:
		by = func(a, b webui.Workload) int { return cmp.Compare(a.Queue, b.Queue) }
	case SortGPU:
		by = func(a, b webui.Workload) int {
			an, anode, ai := firstGPU(a)
			bn, bnode, bi := firstGPU(b)
			if an != bn {
				if an {
					return 1
				}
				return -1
			}
			return cmp.Or(cmp.Compare(anode, bnode), cmp.Compare(ai, bi))
		}
	case SortLongest:
		by = func(a, b webui.Workload) int { return cmp.Compare(duration(b, v.Now), duration(a, v.Now)) }
	}
	if by != nil {
		slices.SortStableFunc(ws, by)
	}
	return ws
}

func jobTable(s webui.Snapshot, jobs []webui.Workload, v View) (title, head string, rows []string) {
	title = fmt.Sprintf("Jobs · %d of %d · filter %s · sort %s", len(jobs), len(s.Workloads), v.Filter, v.Sort)
	if s.WorkloadsOmitted > 0 {
		title += fmt.Sprintf(" · and %d older finished ones the daemon did not send", s.WorkloadsOmitted)
	}
	// Each running job's memory, from its shares on the GPUs.
	type key struct {
		job, node string
		index     int
	}
	shares := map[key]webui.Share{}
	for _, g := range s.GPUs {
		for _, sh := range g.Shares {
			shares[key{sh.Workload, g.Node, g.Index}] = sh
		}
	}
	multi := len(nodeNames(s.GPUs)) > 1
	cells := [][]string{{"JOB", "STATE", "QUEUE", "GPU", "SHARE/LIMIT", "USED", "MEMORY USED/CAP", "DURATION", "WHY / OUTCOME"}}
	for _, w := range jobs {
		gpu, share, use, memory := "-", "-", "-", "-"
		if w.State == webui.StateQueued {
			share = clean(w.Request)
		}
		if len(w.GPUs) > 0 {
			var gs, ss, us, ms []string
			for _, g := range w.GPUs {
				gs = append(gs, gpuName(w.Node, g.Index, multi))
				if g.MIGProfile != "" {
					ss = append(ss, "MIG "+clean(g.MIGProfile))
				} else {
					ss = append(ss, quantity.FormatShare(g.GuaranteedMilli)+"/"+quantity.FormatShare(g.LimitMilli))
				}
				if sh, ok := shares[key{w.ID, w.Node, g.Index}]; ok && w.State == webui.StateRunning {
					used := "-"
					if sh.MemoryUsedMiB != nil {
						used = mib(*sh.MemoryUsedMiB)
					}
					ms = append(ms, used+"/"+mib(sh.MemoryLimitMiB))
					us = append(us, shareUse(sh))
				}
			}
			gpu, share = strings.Join(gs, ","), joinSame(ss)
			if len(ms) > 0 {
				memory = joinSame(ms)
			}
			if len(us) > 0 {
				use = joinSame(us)
			}
		}
		state := stateWord(w.State)
		if w.Idle != nil {
			state += ", idle since " + w.Idle.Since.In(v.Now.Location()).Format("15:04")
		}
		cells = append(cells, []string{clean(w.ID), state, clean(w.Queue), gpu, share, use, memory, durationText(w, v.Now), cmp.Or(outcome(w), "-")})
	}
	// Narrow: the reason keeps room; the memory, queue, duration, use,
	// share and GPU go first, in that order.
	lines := columns(cells, v.Width, 30, 6, 2, 7, 5, 4, 3)
	if len(jobs) == 0 {
		if len(s.Workloads) == 0 {
			lines = append(lines, "no jobs yet")
		} else {
			lines = append(lines, "no job matches the filter "+v.Filter.String()+" (f: next filter)")
		}
	}
	return title, lines[0], lines[1:]
}

// joinSame is one value when all are the same ("0.5/0.8" for two GPUs
// with the same share), else all of them, comma-separated.
func joinSame(vs []string) string {
	if len(vs) > 0 && !slices.ContainsFunc(vs, func(v string) bool { return v != vs[0] }) {
		return vs[0]
	}
	return strings.Join(vs, ",")
}

// stateWord is a job state as the page shows it (queued jobs "wait").
func stateWord(s string) string {
	if s == webui.StateQueued {
		return "waiting"
	}
	return clean(s)
}

// outcome is why a job waits (tessera queue's reason), why it is being
// preempted, or how it ended, as the page's "Why / outcome" column.
func outcome(w webui.Workload) string {
	r := clean(w.Reason)
	if !w.Live() && w.ExitCode != nil && !strings.Contains(r, "exit") {
		e := fmt.Sprintf("exit %d", *w.ExitCode)
		if r != "" {
			e += "; " + r
		}
		return e
	}
	return r
}

// duration is how long w has run, waited, or ran, at now.
func duration(w webui.Workload, now time.Time) time.Duration {
	switch {
	case w.State == webui.StateRunning && w.Started != nil:
		return now.Sub(*w.Started)
	case w.State == webui.StateQueued:
		return now.Sub(w.Submitted)
	case w.Finished != nil && w.Started != nil:
		return w.Finished.Sub(*w.Started)
	case w.Finished != nil:
		return w.Finished.Sub(w.Submitted)
	}
	return 0
}

// durationText is the page's duration column: "running 3m 05s",
// "waiting 45s", "ran 2h 07m", "waited 10s".
func durationText(w webui.Workload, now time.Time) string {
	d := humanDuration(duration(w, now))
	switch {
	case w.State == webui.StateRunning && w.Started != nil:
		return "running " + d
	case w.State == webui.StateQueued:
		return "waiting " + d
	case w.Finished != nil && w.Started != nil:
		return "ran " + d
	case w.Finished != nil:
		return "waited " + d
	}
	return "-"
}

// humanDuration renders d as the page does: "45s", "3m 05s", "2h 07m",
// "3d 4h".
func humanDuration(d time.Duration) string {
	s := int64(max(d, 0) / time.Second)
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	m := s / 60
	if m < 60 {
		return fmt.Sprintf("%dm %02ds", m, s%60)
	}
	h := m / 60
	if h < 48 {
		return fmt.Sprintf("%dh %02dm", h, m%60)
	}
	return fmt.Sprintf("%dd %dh", h/24, h%24)
}

// columns lays out cells (the first row the heads) in columns two spaces
// apart; the last column is not padded. With a width, while the other
// columns leave the last one less than minLast cells, it leaves out the
// columns of drop, in that order.
func columns(cells [][]string, width, minLast int, drop ...int) []string {
	if len(cells) == 0 {
		return nil
	}
	n := len(cells[0])
	widths := make([]int, n)
	for _, row := range cells {
		for i, c := range row[:n-1] {
			widths[i] = max(widths[i], ansi.StringWidth(c))
		}
	}
	shown := make([]bool, n)
	used := 0
	for i := range n {
		shown[i] = true
		if i < n-1 {
			used += widths[i] + 2
		}
	}
	for _, i := range drop {
		if width <= 0 || used+minLast <= width {
			break
		}
		shown[i] = false
		used -= widths[i] + 2
	}
	out := make([]string, 0, len(cells))
	for _, row := range cells {
		var b strings.Builder
		for i, c := range row {
			if !shown[i] {
				continue
			}
			b.WriteString(c)
			if i < n-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-ansi.StringWidth(c)+2))
			}
		}
		out = append(out, b.String())
	}
	return out
}

// barWidth is the cells of a bar for a terminal width (0: no limit).
func barWidth(width int) int {
	switch {
	case width <= 0 || width >= 160:
		return 20
	case width >= 110:
		return 12
	}
	return 8
}

// computeBar draws a GPU's guaranteed booking and burst limit (thousandths
// of one GPU) in n cells.
func computeBar(guaranteed, limit int64, n int) string {
	g := cells(guaranteed, 1000, n)
	l := max(cells(limit, 1000, n), g)
	return strings.Repeat(cellFull, g) + strings.Repeat(cellBurst, l-g) + strings.Repeat(cellFree, n-l)
}

func memoryBar(booked, total int64, n int) string {
	b := cells(booked, total, n)
	return strings.Repeat(cellFull, b) + strings.Repeat(cellFree, n-b)
}

// cells is v of total in n cells, rounded, at least one for any v > 0.
func cells(v, total int64, n int) int {
	if v <= 0 || total <= 0 {
		return 0
	}
	c := int((v*int64(n)*2 + total) / (2 * total))
	return min(max(c, 1), n)
}

// mib renders MiB as the page does: exact binary units where they are
// ("20Gi", "1.5Gi"), else one decimal ("140.4Gi") or two for Ti.
func mib(v int64) string {
	switch {
	case v != 0 && v%(1<<20) == 0, v >= 1024 && (v*10)%1024 == 0, v < 1024:
		return quantity.FormatMiB(v)
	case v >= 1<<20:
		return fmt.Sprintf("%.2fTi", float64(v)/(1<<20))
	}
	return fmt.Sprintf("%.1fGi", float64(v)/1024)
}

func pct(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", (200*a+b)/(2*b))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// nodeNames are the GPUs' distinct nodes, in order.
func nodeNames(gpus []webui.GPU) []string {
	var names []string
	for _, g := range gpus {
		if !slices.Contains(names, g.Node) {
			names = append(names, g.Node)
		}
	}
	return names
}

func gpuName(node string, index int, multi bool) string {
	if multi {
		return fmt.Sprintf("%s/%d", clean(node), index)
	}
	return fmt.Sprint(index)
}

// clean makes a string from the daemon safe to write to a terminal: each
// control character (ESC, so any escape sequence, newlines, tabs) and
// each byte of invalid UTF-8 is written out as an escape ("\x1b", "\n"),
// as tessera ps shows them (termsafe.String).
func clean(s string) string { return termsafe.String(s) }
