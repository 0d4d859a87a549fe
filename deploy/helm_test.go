package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tessera-gpu/tessera/test/testcluster"
	"github.com/tessera-gpu/tessera/test/toolbin"
)

// chartDir is the chart, relative to this package.
const chartDir = "helm/tessera"

// helmCLI runs the helm binary built from tools/cluster (the pinned
// helm.sh/helm/v4), with its caches and configuration in a folder of the
// test's own.
type helmCLI struct {
	bin string
	env []string
}

func newHelm(t *testing.T) helmCLI {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	bin, err := toolbin.Binary(ctx, "helm")
	if err != nil {
		t.Fatalf("build helm: %v", err)
	}
	home := t.TempDir()
	env := append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	return helmCLI{bin: bin, env: env}
}

// run runs helm with args and returns its standard output; an error
// carries standard error.
func (h helmCLI) run(args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// valueSet is one way to install the chart: a values file's text and
// --set arguments.
type valueSet struct {
	name   string
	values string
	set    []string
}

// args are helm's arguments for s: the values file is written into dir.
func (s valueSet) args(t *testing.T, dir string) []string {
	t.Helper()
	var args []string
	if s.values != "" {
		f := filepath.Join(dir, s.name+"-values.yaml")
		if err := os.WriteFile(f, []byte(s.values), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", f)
	}
	for _, kv := range s.set {
		args = append(args, "--set", kv)
	}
	return args
}

// valueSets are the configurations the chart is tested with.
var valueSets = []valueSet{
	{name: "defaults"},
	{name: "cert-manager", set: []string{"certManager.enabled=true"}},
	{name: "cert-manager-issuer", values: "certManager:\n  enabled: true\n  issuerRef: {kind: ClusterIssuer, name: company-ca}\n"},
	{name: "monitors", set: []string{"monitoring.serviceMonitor.enabled=true", "monitoring.podMonitor.enabled=true",
		"monitoring.podMonitor.interval=15s", "monitoring.prometheusRule.enabled=true", "monitoring.prometheusRule.labels.release=prom",
		"monitoring.dashboards.enabled=true", "monitoring.dashboards.annotations.grafana_folder=Tessera"}},
	{name: "pools", values: `
agent:
  nodeSelector: {tessera.io/gpu-node: "true"}
  installCRD: true
  draPublish: true
  dra: true
  pools:
    - {name: a100, nodeSelector: {pool: a100}, mode: shared, slotsPerGPU: 8}
    - {name: h100-mps, nodeSelector: {pool: h100}, mode: mps, mpsControl: /usr/bin/nvidia-cuda-mps-control}
    - name: l4
      nodeSelector: {pool: l4}
      mode: exclusive
      source: sim:2xL4
      extraArgs: [--compute-fail=closed]
      tolerations: [{key: dedicated, operator: Equal, value: l4, effect: NoSchedule}]
`},
	{name: "custom-image", set: []string{"image.repository=registry.example.com/gpu/tessera", "image.tag=v9.9.9",
		"image.pullPolicy=Always", "imagePullSecrets[0].name=regcred", "schedulerName=gpu"}},
	{name: "no-intercept", set: []string{"agent.interceptLibrary=false", "webhook.enabled=false", "scheduler.replicas=1"}},
}

// template renders the chart as release name in namespace ns.
func (h helmCLI) template(t *testing.T, name, ns string, s valueSet) ([]*unstructured.Unstructured, error) {
	t.Helper()
	args := append([]string{"template", name, chartDir, "--namespace", ns}, s.args(t, t.TempDir())...)
	out, err := h.run(args...)
	if err != nil {
		return nil, err
	}
	return testcluster.DecodeManifests([]byte(out))
}

// TestChartLint: helm lint --strict passes with every value set.
func TestChartLint(t *testing.T) {
	h := newHelm(t)
	for _, s := range valueSets {
		t.Run(s.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir}, s.args(t, t.TempDir())...)
			if out, err := h.run(args...); err != nil {
				t.Fatal(err)
			} else if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}
