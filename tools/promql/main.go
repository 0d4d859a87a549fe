package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Report is what the command prints.
type Report struct {
	Expressions []Expression `json:"expressions"`
	// Recorded are the names the rule files' recording rules define.
	Recorded []string `json:"recorded"`
}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: promql FILE-OR-FOLDER...\n\n"+
			"Parses the PromQL in Grafana dashboards (*.json) and Prometheus rule files (*.yaml, *.yml;\n"+
			"a folder: the files in it) and prints each expression with the metrics it selects, as JSON.\n")
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run checks the files named by args (a folder: its *.json, *.yaml and
// *.yml files) and writes the report to w; the error lists every invalid
// expression, one a line.
func run(args []string, w io.Writer) error {
	files, err := expand(args)
	if err != nil {
		return err
	}
	var rep Report
	var errs []error
	for _, f := range files {
		exprs, recorded, err := checkFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Expressions = append(rep.Expressions, exprs...)
		rep.Recorded = append(rep.Recorded, recorded...)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(rep.Expressions) == 0 {
		return fmt.Errorf("no expression in %s", strings.Join(files, ", "))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// expand turns folders into the dashboard and rule files in them, sorted.
func expand(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		n := len(out)
		for _, e := range entries {
			if kind(e.Name()) != "" && !e.IsDir() {
				out = append(out, filepath.Join(a, e.Name()))
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s: no *.json, *.yaml or *.yml file", a)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// kind is "dashboard" or "rules" by the file's extension, "" otherwise.
func kind(name string) string {
	switch filepath.Ext(name) {
	case ".json":
		return "dashboard"
	case ".yaml", ".yml":
		return "rules"
	}
	return ""
}

// checkFile parses every expression of one file; the error names the file
// and each place whose expression is invalid.
func checkFile(path string) ([]Expression, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var founds []found
	var recorded []string
	vars := map[string]string{}
	switch kind(path) {
	case "dashboard":
		founds, vars, err = dashboardExprs(data)
	case "rules":
		founds, recorded, err = rulesExprs(data)
	default:
		err = errors.New("neither a dashboard (*.json) nor a rule file (*.yaml, *.yml)")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	p := newParser()
	var out []Expression
	var errs []error
	if kind(path) == "dashboard" {
		if err := checkGrafanaSchema(data); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	for _, f := range founds {
		text, err := substitute(f.expr, vars)
		if err == nil && strings.TrimSpace(text) == "" {
			err = errors.New("empty expression")
		}
		var a analysis
		if err == nil {
			a, err = analyse(p, text)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", path, f.where, err))
			continue
		}
		out = append(out, Expression{File: path, Kind: f.kind, Where: f.where, Expr: f.expr, Parsed: text,
			Metrics: a.metrics, Selectors: a.selectors, Grouping: a.grouping})
	}
	return out, recorded, errors.Join(errs...)
}
