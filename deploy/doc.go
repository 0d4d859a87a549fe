// Package deploy holds Tessera's Kubernetes install: the Helm chart
// (helm/tessera: CRDs, RBAC, the scheduler Deployment, the agent DaemonSet
// per node pool and the admission webhook), the plain manifests rendered
// from it (tessera.yaml, webhook.yaml; `make manifests`), and the Grafana
// dashboards and Prometheus rules (grafana/, prometheus/: links to the
// chart's files/). Its Go files only test them, with helm built from
// tools/cluster and a real API server: lint, renders of several value
// sets, refused values, objects created with strict field validation, the
// webhook certificate across helm upgrade, and the scheduler and agent at
// work under the chart's RBAC; and every PromQL expression of the
// dashboards and rules parsed by Prometheus's parser (tools/promql) and
// checked against the metrics Tessera's components export. Nothing
// imports it.
package deploy
