package deploy

import (
	"strings"
	"testing"
)

// TestChartRefusesBadValues: values the chart cannot honour fail the
// render with a message naming the field and what is allowed
// (values.schema.json, or the templates for rules a schema cannot say).
func TestChartRefusesBadValues(t *testing.T) {
	h := newHelm(t)
	cases := []struct {
		name string
		vs   valueSet
		want []string // all in the error
	}{
		{"unknown sharing mode", valueSet{set: []string{"agent.pools[0].mode=timeslice"}},
			[]string{"/agent/pools/0/mode", "shared", "mps", "exclusive"}},
		{"no scheduler replica", valueSet{set: []string{"scheduler.replicas=0"}},
			[]string{"/scheduler/replicas", "minimum", "1"}},
		{"no webhook replica", valueSet{set: []string{"webhook.replicas=0"}},
			[]string{"/webhook/replicas", "1"}},
		{"pool without node selector", valueSet{values: "agent:\n  pools: [{name: a, mode: shared}]\n"},
			[]string{"/agent/pools/0", "nodeSelector"}},
		{"pool with an empty node selector", valueSet{values: "agent:\n  pools: [{name: a, mode: shared, nodeSelector: {}}]\n"},
			[]string{"/agent/pools/0/nodeSelector"}},
		{"no pool", valueSet{values: "agent:\n  pools: []\n"},
			[]string{"/agent/pools"}},
		{"pool name not a DNS label", valueSet{set: []string{"agent.pools[0].name=GPU_Pool"}},
			[]string{"/agent/pools/0/name"}},
		{"duplicate pool names", valueSet{values: "agent:\n  pools:\n    - {name: a, mode: shared, nodeSelector: {p: a}}\n    - {name: a, mode: mps, nodeSelector: {p: b}}\n"},
			[]string{"agent.pools", `"a"`, "appears twice"}},
		{"mps program outside mps mode", valueSet{values: "agent:\n  pools: [{name: default, mode: shared, nodeSelector: {p: a}, mpsControl: /usr/bin/nvidia-cuda-mps-control}]\n"},
			[]string{"agent.pools[default].mpsControl", "mode mps", "shared"}},
		{"slots per GPU out of range", valueSet{values: "agent:\n  pools: [{name: default, mode: shared, nodeSelector: {p: a}, slotsPerGPU: 1001}]\n"},
			[]string{"/agent/pools/0/slotsPerGPU", "want 1,000"}},
		{"misspelt key", valueSet{set: []string{"scheduler.replica=3"}},
			[]string{"replica"}},
		{"bad pull policy", valueSet{set: []string{"image.pullPolicy=Sometimes"}},
			[]string{"/image/pullPolicy", "IfNotPresent"}},
		{"bad issuer kind", valueSet{values: "certManager:\n  enabled: true\n  issuerRef: {kind: Vault, name: x}\n"},
			[]string{"/certManager/issuerRef"}},
		{"dashboards namespace not a DNS label", valueSet{set: []string{"monitoring.dashboards.namespace=Grafana_NS"}},
			[]string{"/monitoring/dashboards/namespace"}},
		{"dra not a boolean", valueSet{set: []string{"agent.dra=yes"}},
			[]string{"/agent/dra", "boolean"}},
		{"kubelet root dir relative", valueSet{set: []string{"agent.kubeletRootDir=var/lib/kubelet"}},
			[]string{"/agent/kubeletRootDir", "does not match pattern"}},
		{"kubelet root dir with a trailing slash", valueSet{set: []string{"agent.kubeletRootDir=/var/lib/kubelet/"}},
			[]string{"/agent/kubeletRootDir", "does not match pattern"}},
		{"misspelt rule key", valueSet{set: []string{"monitoring.prometheusRule.enable=true"}},
			[]string{"enable"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.vs.name = "bad"
			_, err := h.template(t, renderRelease, renderNamespace, c.vs)
			if err == nil {
				t.Fatal("rendered; want a refusal")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
