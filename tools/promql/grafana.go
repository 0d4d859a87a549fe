package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// panelSchemas are the panel types whose options and field configuration
// are checked against Grafana's schema: those Tessera's dashboards use.
// Another type is refused until it is added here.
func panelSchemas() []variants.PanelcfgConfig {
	return []variants.PanelcfgConfig{
		timeseries.VariantConfig(), stat.VariantConfig(), table.VariantConfig(), bargauge.VariantConfig(),
		statetimeline.VariantConfig(), heatmap.VariantConfig(),
	}
}

// checkGrafanaSchema decodes a dashboard strictly with Grafana's dashboard
// schema (grafana-foundation-sdk, generated from Grafana's own: unknown
// fields, wrong types and missing required fields are errors) and
// validates it; panel options are decoded with their panel type's schema.
func checkGrafanaSchema(data []byte) error {
	var model dashboard
	if err := json.Unmarshal(data, &model); err != nil {
		return fmt.Errorf("not a Grafana dashboard JSON model: %w", err)
	}
	rt := cog.NewRuntime() // the SDK's registry; registering again is harmless
	known := []string{"row"}
	for _, v := range panelSchemas() {
		rt.RegisterPanelcfgVariant(v)
		known = append(known, v.Identifier)
	}
	rt.RegisterDataqueryVariant(prometheus.VariantConfig())
	var errs []error
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if !slices.Contains(known, p.Type) {
				errs = append(errs, fmt.Errorf("panel %q (id %d): type %q is not one whose schema is checked (%v): add it to panelSchemas", p.Title, p.ID, p.Type, known))
			}
			walk(p.Panels)
		}
	}
	walk(model.Panels)
	// The SDK marks the classic schema deprecated in favour of its v2
	// resources, but the classic JSON model is what Grafana's import and its
	// dashboard sidecar read, and what these files are.
	//lint:ignore SA1019 the classic dashboard JSON model is the format shipped
	var d grafana.Dashboard
	if err := d.UnmarshalJSONStrict(data); !empty(err) {
		errs = append(errs, err)
	} else if err := d.Validate(); !empty(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("not accepted by Grafana's dashboard schema: %w", err)
	}
	return nil
}

// empty reports whether err is no error: the SDK returns its error list
// even when it holds none.
func empty(err error) bool {
	var be cog.BuildErrors
	if errors.As(err, &be) {
		return len(be) == 0
	}
	return err == nil
}
