package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAnalyse(t *testing.T) {
	cases := []struct {
		name     string
		expr     string
		metrics  []string
		grouping []string
		matchers []Matcher // of the first selector
		err      string
	}{
		{name: "aggregation over a join",
			expr:     `sum by (model) (tessera_gpu_compute_guaranteed_ratio * on (node, uuid) group_left (model) tessera_gpu_info)`,
			metrics:  []string{"tessera_gpu_compute_guaranteed_ratio", "tessera_gpu_info"},
			grouping: []string{"model", "node", "uuid"}},
		{name: "range selector in a histogram quantile",
			expr:     `histogram_quantile(0.9, sum by (le) (rate(tessera_scheduler_cycle_duration_seconds_bucket[5m])))`,
			metrics:  []string{"tessera_scheduler_cycle_duration_seconds_bucket"},
			grouping: []string{"le"}},
		{name: "matchers are reported",
			expr:     `up{job="tessera-agent", instance!~"10\\..*"} == 0`,
			metrics:  []string{"up"},
			matchers: []Matcher{{"job", "=", "tessera-agent"}, {"instance", "!~", `10\..*`}}},
		{name: "a name given as a matcher counts",
			expr:    `{__name__="tessera_gpu_info"}`,
			metrics: []string{"tessera_gpu_info"}},
		{name: "a repeated metric is listed once",
			expr:    `tessera_gpu_info or tessera_gpu_info offset 1h`,
			metrics: []string{"tessera_gpu_info"}},
		{name: "unclosed parenthesis", expr: `sum(rate(tessera_gpu_info[5m])`, err: "unclosed left parenthesis"},
		{name: "unknown function", expr: `summ(tessera_gpu_info)`, err: `unknown function with name "summ"`},
		{name: "selector by regular expression on the name", expr: `{__name__=~"tessera_.*"}`, err: "names no metric"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := analyse(newParser(), c.expr)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.metrics, c.metrics) {
				t.Errorf("metrics %v, want %v", a.metrics, c.metrics)
			}
			if !slices.Equal(a.grouping, c.grouping) {
				t.Errorf("grouping %v, want %v", a.grouping, c.grouping)
			}
			if c.matchers != nil && !slices.Equal(a.selectors[0].Matchers, c.matchers) {
				t.Errorf("matchers %v, want %v", a.selectors[0].Matchers, c.matchers)
			}
		})
	}
}

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"node": "sample", "step": "30s"}
	cases := []struct{ in, want, err string }{
		{in: `rate(x{node=~"$node"}[$__rate_interval])`, want: `rate(x{node=~"sample"}[5m])`},
		{in: `x{node=~"${node}", gpu=~"${node:regex}"}`, want: `x{node=~"sample", gpu=~"sample"}`},
		{in: `avg_over_time(x{node="[[node]]"}[[[step]]])`, want: `avg_over_time(x{node="sample"}[30s])`},
		{in: `x{a=~"b$"} / $__range_s`, want: `x{a=~"b$"} / 3600`},
		{in: `x{node=~"$nodes"}`, err: "undefined variable $nodes"},
		{in: `x[$__unknown]`, err: "undefined variable $__unknown"},
	}
	for _, c := range cases {
		got, err := substitute(c.in, vars)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.in, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestVariableExpr(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{in: `label_values(tessera_gpu_info{node=~"$node"}, gpu)`, want: `tessera_gpu_info{node=~"$node"}`},
		{in: `label_values(sum by (node, gpu) (x), gpu)`, want: `sum by (node, gpu) (x)`},
		{in: `query_result(topk(5, x))`, want: `topk(5, x)`},
		{in: `label_values(node)`},
		{in: `metrics(tessera_.*)`},
		{in: `count(x)`, err: "none of label_values"},
	}
	for _, c := range cases {
		got, err := variableExpr(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.in, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

const goodDashboard = `{
  "title": "Test",
  "schemaVersion": 42,
  "templating": {"list": [
    {"name": "datasource", "type": "datasource", "query": "prometheus"},
    {"name": "node", "type": "query", "query": {"qryType": 1, "query": "label_values(tessera_gpu_info, node)", "refId": "V"}},
    {"name": "window", "type": "interval", "query": "5m,1h"}
  ]},
  "annotations": {"list": [{"name": "unhealthy", "enable": true, "iconColor": "red", "expr": "changes(tessera_gpu_healthy[5m]) > 0"}]},
  "panels": [
    {"id": 1, "type": "row", "title": "Row", "collapsed": true, "panels": [
      {"id": 2, "type": "timeseries", "title": "Inside", "targets": [{"refId": "A", "expr": "avg_over_time(tessera_gpu_utilization_ratio{node=~\"$node\"}[$window])"}]}
    ]},
    {"id": 3, "type": "stat", "title": "GPUs", "transparent": false, "targets": [{"refId": "A", "expr": "count(tessera_gpu_info)"}]}
  ]
}`

const goodRules = `groups:
  - name: g
    rules:
      - record: cluster:tessera_gpus:count
        expr: count(tessera_gpu_info)
      - alert: TesseraGPUUnhealthy
        expr: tessera_gpu_healthy == 0
        for: 5m
        labels: {severity: warning}
        annotations: {summary: "GPU {{ $labels.gpu }} is unhealthy"}
`

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRun: a folder's dashboards and rules give one report; the places
// are named; rows' panels, variables and annotations are read.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "d.json", goodDashboard)
	write(t, dir, "r.yaml", goodRules)
	write(t, dir, "README.md", "not read")
	var out bytes.Buffer
	if err := run([]string{dir}, &out); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	var where []string
	for _, e := range rep.Expressions {
		where = append(where, e.Kind+": "+e.Where+": "+e.Parsed)
	}
	want := []string{
		`panel: panel "Inside" (id 2) query A: avg_over_time(tessera_gpu_utilization_ratio{node=~"sample"}[5m])`,
		`panel: panel "GPUs" (id 3) query A: count(tessera_gpu_info)`,
		`variable: variable node: tessera_gpu_info`,
		`annotation: annotation "unhealthy": changes(tessera_gpu_healthy[5m]) > 0`,
		`record: group g record cluster:tessera_gpus:count: count(tessera_gpu_info)`,
		`alert: group g alert TesseraGPUUnhealthy: tessera_gpu_healthy == 0`,
	}
	if !slices.Equal(where, want) {
		t.Errorf("expressions\n%s\nwant\n%s", strings.Join(where, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(rep.Recorded, []string{"cluster:tessera_gpus:count"}) {
		t.Errorf("recorded %v", rep.Recorded)
	}
}

// TestRunRefuses: each invalid file fails the run, naming the file, the
// place and what is wrong; every error is reported, not only the first.
func TestRunRefuses(t *testing.T) {
	cases := []struct {
		name, file, content string
		want                []string
	}{
		{"bad PromQL in a panel", "d.json",
			strings.Replace(goodDashboard, `count(tessera_gpu_info)`, `count(tessera_gpu_info`, 1),
			[]string{"d.json", `panel "GPUs" (id 3) query A`, "unclosed left parenthesis"}},
		{"two bad panels, both reported", "d.json",
			strings.NewReplacer(`count(tessera_gpu_info)`, `count(`, `[$window]`, `[$windows]`).Replace(goodDashboard),
			[]string{`panel "GPUs" (id 3) query A`, `panel "Inside" (id 2) query A: undefined variable $windows`}},
		{"bad variable query", "d.json",
			strings.Replace(goodDashboard, `label_values(tessera_gpu_info, node)`, `label_values(tessera_gpu_info{, node)`, 1),
			[]string{"variable node"}},
		{"empty query", "d.json",
			strings.Replace(goodDashboard, `count(tessera_gpu_info)`, ``, 1),
			[]string{`panel "GPUs" (id 3) query A: empty expression`}},
		{"not a dashboard", "d.json", `[1, 2]`, []string{"d.json", "not a Grafana dashboard"}},
		{"panel field Grafana does not know", "d.json",
			strings.Replace(goodDashboard, `"transparent": false`, `"transparant": false`, 1),
			[]string{"d.json", "not accepted by Grafana's dashboard schema", "unexpected field 'transparant'"}},
		{"field of the wrong type", "d.json",
			strings.Replace(goodDashboard, `"schemaVersion": 42`, `"schemaVersion": "42"`, 1),
			[]string{"not accepted by Grafana's dashboard schema", "schemaVersion"}},
		{"schema and PromQL errors both reported", "d.json",
			strings.NewReplacer(`"transparent": false`, `"transparent": 1`, `count(tessera_gpu_info)`, `count(`).Replace(goodDashboard),
			[]string{"not accepted by Grafana's dashboard schema", `panel "GPUs" (id 3) query A`}},
		{"panel type without a schema here", "d.json",
			strings.Replace(goodDashboard, `"type": "stat"`, `"type": "piechart"`, 1),
			[]string{`panel "GPUs" (id 3): type "piechart" is not one whose schema is checked`}},
		{"bad PromQL in a rule", "r.yaml",
			strings.Replace(goodRules, `tessera_gpu_healthy == 0`, `tessera_gpu_healthy ==`, 1),
			[]string{"r.yaml", "TesseraGPUUnhealthy"}},
		{"misspelt rule field", "r.yaml",
			strings.Replace(goodRules, `annotations:`, `anotations:`, 1),
			[]string{"r.yaml", "field anotations not found"}},
		{"bad annotation template", "r.yaml",
			strings.Replace(goodRules, `{{ $labels.gpu }}`, `{{ $labels.gpu }`, 1),
			[]string{"r.yaml", "TesseraGPUUnhealthy", "annotation"}},
		{"bad metric name in a record", "r.yaml",
			strings.Replace(goodRules, `record: cluster:tessera_gpus:count`, `record: cluster tessera`, 1),
			[]string{"r.yaml", "invalid recording rule name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, t.TempDir(), c.file, c.content)
			var out bytes.Buffer
			err := run([]string{p}, &out)
			if err == nil {
				t.Fatalf("accepted:\n%s", out.String())
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if out.Len() != 0 {
				t.Errorf("printed a report despite the error")
			}
		})
	}
}
