package tracesim

import (
	"fmt"
	"strings"
)

// Published is the FGD study's mean result for one trace and policy.
type Published struct {
	Seeds        int
	At100, AtEnd float64
}

// PublishedTable holds the study's published results by trace and our
// policy name.
type PublishedTable map[string]map[string]Published

// studyPolicy maps the study's policy label to ours ("" when unknown).
func studyPolicy(label string) string {
	switch label {
	case "Random":
		return "random"
	case "DotProd":
		return "dotproduct"
	case "GpuClustering":
		return "gpuclustering"
	case "GpuPacking":
		return "gpupacking"
	case "BestFit":
		return "bestfit"
	case "FGD":
		return "fgd"
	}
	return ""
}

// LoadPublished reads the study's analysis_allo_discrete.csv (columns
// workload, sc_policy, tune, seed, and "0".."130"), keeping rows whose tune
// is tune, and averages over seeds. The end value is column "130" (or the
// largest arrived percent present).
func LoadPublished(path string, tune float64) (PublishedTable, error) {
	t, err := readTable(path, "workload", "sc_policy", "tune", "100")
	if err != nil {
		return nil, err
	}
	endCol := "130"
	if _, ok := t.header[endCol]; !ok {
		endCol = "100"
	}
	out := PublishedTable{}
	for i := range t.rows {
		var rowTune float64
		if _, err := fmt.Sscan(t.str(i, "tune"), &rowTune); err != nil {
			return nil, fmt.Errorf("%s:%d: column tune: %q is not a number", t.file, t.lines[i], t.str(i, "tune"))
		}
		if rowTune != tune {
			continue
		}
		label := t.str(i, "sc_policy")
		if _, after, ok := strings.Cut(label, "-"); ok {
			label = after
		}
		pol := studyPolicy(label)
		if pol == "" {
			continue
		}
		var at100, atEnd float64
		if _, err := fmt.Sscan(t.str(i, "100"), &at100); err != nil {
			return nil, fmt.Errorf("%s:%d: column 100: %q is not a number", t.file, t.lines[i], t.str(i, "100"))
		}
		if _, err := fmt.Sscan(t.str(i, endCol), &atEnd); err != nil {
			return nil, fmt.Errorf("%s:%d: column %s: %q is not a number", t.file, t.lines[i], endCol, t.str(i, endCol))
		}
		trace := TraceName(t.str(i, "workload"))
		if out[trace] == nil {
			out[trace] = map[string]Published{}
		}
		p := out[trace][pol]
		p.At100 = (p.At100*float64(p.Seeds) + at100) / float64(p.Seeds+1)
		p.AtEnd = (p.AtEnd*float64(p.Seeds) + atEnd) / float64(p.Seeds+1)
		p.Seeds++
		out[trace][pol] = p
	}
	return out, nil
}

// Lookup returns the published result for a trace and policy, if any.
func (t PublishedTable) Lookup(trace, policy string) (Published, bool) {
	p, ok := t[trace][policy]
	return p, ok
}

// TraceName turns a pod-list file name or workload label
// ("data/openb_pod_list_gpushare40.csv") into a short trace name
// ("gpushare40").
func TraceName(s string) string {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSuffix(s, ".csv")
	return strings.TrimPrefix(s, "openb_pod_list_")
}
