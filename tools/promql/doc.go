// Command promql reads Tessera's Grafana dashboards (JSON model) and
// Prometheus rule files and parses every PromQL expression in them with
// Prometheus's own parser (github.com/prometheus/prometheus/promql/parser;
// rule files through model/rulefmt, as `promtool check rules` does). Each
// dashboard is also decoded strictly with Grafana's dashboard schema
// (github.com/grafana/grafana-foundation-sdk, generated from Grafana's own),
// panel options with their panel type's schema. It
// prints, as JSON, each expression with where it is (panel and query,
// variable, annotation, alert or recording rule), the metric names it
// selects and the labels each selector matches on; it exits 1, naming the
// file, the place and the parser's error, when any expression or rule
// file is invalid.
//
// Grafana's template variables ($node, ${gpu}, [[queue]]) and built-in
// intervals ($__rate_interval, $__interval, $__range) are replaced by
// sample values before parsing; a variable the dashboard does not define is
// an error.
//
// It is a module of its own so that these dependencies stay out of
// Tessera's go.mod; deploy/monitoring_test.go builds and runs it. It
// owns reading and parsing only: it must not decide which metric names are
// valid (the test compares them with what Tessera's registries export),
// write files or reach the network.
package main
