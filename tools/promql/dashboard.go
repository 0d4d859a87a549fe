package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// dashboard is the part of Grafana's dashboard JSON model that holds
// queries.
type dashboard struct {
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []annotation `json:"list"`
	} `json:"annotations"`
}

type panel struct {
	ID      int      `json:"id"`
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	Targets []target `json:"targets"`
	// Panels are a row's panels (a collapsed row keeps them here).
	Panels []panel `json:"panels"`
}

type target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

type variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Query is a string, or for query variables of current Grafana an
	// object whose "query" holds the string.
	Query json.RawMessage `json:"query"`
}

type annotation struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

// queryText is a variable's query as a string ("" when it has none).
func (v variable) queryText() (string, error) {
	if len(v.Query) == 0 || string(v.Query) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v.Query, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &o); err != nil {
		return "", fmt.Errorf("variable %s: query is neither a string nor an object with a query: %w", v.Name, err)
	}
	return o.Query, nil
}

// builtin is the sample value of one of Grafana's global variables that
// may appear in a Prometheus query, of the right kind to parse.
func builtin(name string) (string, bool) {
	switch name {
	case "__interval", "__auto":
		return "1m", true
	case "__rate_interval":
		return "5m", true
	case "__range":
		return "1h", true
	case "__interval_ms":
		return "60000", true
	case "__range_s":
		return "3600", true
	case "__range_ms":
		return "3600000", true
	}
	return "", false
}

// varRef matches Grafana's variable syntaxes: $name, [[name]] or
// [[name:format]], ${name}, ${name.field} or ${name:format} (Grafana's own
// pattern).
var varRef = regexp.MustCompile(`\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^}]+))?(?::([^}]+))?\}`)

// substitute replaces every variable in text by its sample value; a
// variable neither built in nor in vars is an error.
func substitute(text string, vars map[string]string) (string, error) {
	var unknown []string
	out := varRef.ReplaceAllStringFunc(text, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[4]
		if v, ok := builtin(name); ok {
			return v
		}
		if v, ok := vars[name]; ok {
			return v
		}
		unknown = append(unknown, ref)
		return ref
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("undefined variable %s (not built into Grafana nor in templating.list)", strings.Join(unknown, ", "))
	}
	return out, nil
}

// sampleValues gives each variable a value to parse with: the first of a
// custom or interval variable's options, a constant's or text box's value,
// and a plain label value for the others (query, datasource, ad hoc).
func sampleValues(vars []variable) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vars {
		q, err := v.queryText()
		if err != nil {
			return nil, err
		}
		first := strings.TrimSpace(strings.Split(q, ",")[0])
		switch {
		case v.Type == "interval" && (first == "" || first == "auto"):
			out[v.Name] = "1m"
		case (v.Type == "interval" || v.Type == "custom" || v.Type == "constant" || v.Type == "textbox") && first != "":
			out[v.Name] = first
		default:
			out[v.Name] = "sample"
		}
	}
	return out, nil
}

var (
	labelValues2 = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	labelValues1 = regexp.MustCompile(`^\s*label_values\(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	labelNames   = regexp.MustCompile(`^\s*label_names\((.*)\)\s*$`)
	queryResult  = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
	metricsQuery = regexp.MustCompile(`^\s*metrics\(.*\)\s*$`)
)

// variableExpr is the PromQL inside a Prometheus variable query (Grafana's
// label_values, label_names, query_result, metrics): "" when it holds
// none.
func variableExpr(q string) (string, error) {
	if m := labelValues2.FindStringSubmatch(q); m != nil {
		return strings.TrimSpace(m[1]), nil
	}
	if m := labelNames.FindStringSubmatch(q); m != nil {
		return strings.TrimSpace(m[1]), nil
	}
	if m := queryResult.FindStringSubmatch(q); m != nil {
		return strings.TrimSpace(m[1]), nil
	}
	if labelValues1.MatchString(q) || metricsQuery.MatchString(q) {
		return "", nil
	}
	return "", fmt.Errorf("query %q is none of label_values(...), label_names(...), query_result(...), metrics(...)", q)
}

// found is one expression before parsing.
type found struct {
	kind, where, expr string
}

// dashboardExprs lists the expressions of a dashboard and the sample
// values of its variables.
func dashboardExprs(data []byte) ([]found, map[string]string, error) {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, nil, fmt.Errorf("not a Grafana dashboard JSON model: %w", err)
	}
	vars, err := sampleValues(d.Templating.List)
	if err != nil {
		return nil, nil, err
	}
	var out []found
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, found{"panel", fmt.Sprintf("panel %q (id %d) query %s", p.Title, p.ID, t.RefID), t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.queryText()
		if err != nil {
			return nil, nil, err
		}
		e, err := variableExpr(q)
		if err != nil {
			return nil, nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		if e != "" {
			out = append(out, found{"variable", "variable " + v.Name, e})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out = append(out, found{"annotation", fmt.Sprintf("annotation %q", a.Name), a.Expr})
		}
	}
	return out, vars, nil
}
