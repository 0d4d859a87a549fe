package main

import (
	"fmt"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Selector is one vector or range selector of an expression: the metric it
// names and its other label matchers.
type Selector struct {
	Metric   string    `json:"metric"`
	Matchers []Matcher `json:"matchers,omitempty"`
}

// Matcher is one label matcher: label, operator (=, !=, =~, !~) and value.
type Matcher struct {
	Label string `json:"label"`
	Op    string `json:"op"`
	Value string `json:"value"`
}

// Expression is one PromQL expression found in a file.
type Expression struct {
	File string `json:"file"`
	// Kind is panel, variable, annotation, alert or record.
	Kind string `json:"kind"`
	// Where names the place in the file: the panel's title and id and the
	// query's refId, the variable's or annotation's name, the rule group
	// and the rule's name.
	Where string `json:"where"`
	// Expr is the expression as written; Parsed is what was parsed (Expr
	// with Grafana's variables replaced).
	Expr   string `json:"expr"`
	Parsed string `json:"parsed"`
	// Metrics are the metric names it selects, sorted, without repeats.
	Metrics   []string   `json:"metrics"`
	Selectors []Selector `json:"selectors"`
	// Grouping are the labels named in by, without, on, ignoring,
	// group_left and group_right, sorted, without repeats.
	Grouping []string `json:"grouping,omitempty"`
}

// analysis is what analyse finds in one expression.
type analysis struct {
	metrics   []string
	selectors []Selector
	grouping  []string
}

// newParser is the parser every expression goes through: Prometheus's
// defaults (no experimental functions), as a server without feature flags
// runs them.
func newParser() parser.Parser { return parser.NewParser(parser.Options{}) }

// analyse parses text and lists the metric names, selectors and grouping
// labels in it. A selector that names no metric ({__name__=~"..."} or only
// other labels) is an error: its metric names cannot be checked.
func analyse(p parser.Parser, text string) (analysis, error) {
	var a analysis
	expr, err := p.ParseExpr(text)
	if err != nil {
		return a, err
	}
	var bad error
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.AggregateExpr:
			a.grouping = append(a.grouping, n.Grouping...)
			return nil
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil {
				a.grouping = append(a.grouping, vm.MatchingLabels...)
				a.grouping = append(a.grouping, vm.Include...)
			}
			return nil
		}
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		var ms []Matcher
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				if name == "" && m.Type == labels.MatchEqual {
					name = m.Value
				}
				continue
			}
			ms = append(ms, Matcher{Label: m.Name, Op: m.Type.String(), Value: m.Value})
		}
		if name == "" {
			if bad == nil {
				bad = fmt.Errorf("selector %s names no metric (give the name, not a regular expression on __name__)", vs.String())
			}
			return nil
		}
		a.selectors = append(a.selectors, Selector{Metric: name, Matchers: ms})
		a.metrics = append(a.metrics, name)
		return nil
	})
	if bad != nil {
		return analysis{}, bad
	}
	slices.Sort(a.metrics)
	a.metrics = slices.Compact(a.metrics)
	slices.Sort(a.grouping)
	a.grouping = slices.Compact(a.grouping)
	return a, nil
}
