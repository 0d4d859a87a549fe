// Package schedmetrics holds the Kubernetes scheduler's Prometheus
// series (tessera_scheduler_*): pending pods, decisions and bindings by
// result, backoff, decision and cycle durations, and per queue usage,
// guarantee, fair share and pending pods. They are registered on the
// registry given to New, never on a global one.
//
// It records what it is told; it must not read the cluster or decide.
package schedmetrics
