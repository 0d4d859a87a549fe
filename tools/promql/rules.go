package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
)

// rulesExprs checks a Prometheus rule file as Prometheus loads it (known
// fields only, valid PromQL, names and templates; legacy metric and label
// names) and lists its expressions and the names its recording rules
// define.
func rulesExprs(data []byte) ([]found, []string, error) {
	groups, errs := rulefmt.Parse(data, false, model.LegacyValidation, newParser(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	var out []found
	var recorded []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out = append(out, found{"record", fmt.Sprintf("group %s record %s", g.Name, r.Record), r.Expr})
				recorded = append(recorded, r.Record)
				continue
			}
			out = append(out, found{"alert", fmt.Sprintf("group %s alert %s", g.Name, r.Alert), r.Expr})
		}
	}
	return out, recorded, nil
}
