package deploy

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// objects is a rendered chart.
type objects []*unstructured.Unstructured

func (o objects) get(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	if obj := o.find(kind, name); obj != nil {
		return obj
	}
	t.Fatalf("no %s %s among %s", kind, name, o.names())
	return nil
}

func (o objects) find(kind, name string) *unstructured.Unstructured {
	for _, obj := range o {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	return nil
}

func (o objects) ofKind(kind string) objects {
	var out objects
	for _, obj := range o {
		if obj.GetKind() == kind {
			out = append(out, obj)
		}
	}
	return out
}

func (o objects) names() []string {
	var out []string
	for _, obj := range o {
		out = append(out, obj.GetKind()+"/"+obj.GetName())
	}
	return out
}

// podSpec is the pod template's spec of a Deployment or DaemonSet.
func podSpec(t *testing.T, obj *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, ok, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
	if !ok {
		t.Fatalf("%s %s has no pod template", obj.GetKind(), obj.GetName())
	}
	return spec
}

// container returns the named container (or init container) of spec.
func container(t *testing.T, spec map[string]any, name string) map[string]any {
	t.Helper()
	for _, field := range []string{"containers", "initContainers"} {
		cs, _, _ := unstructured.NestedSlice(spec, field)
		for _, c := range cs {
			if m := c.(map[string]any); m["name"] == name {
				return m
			}
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

func args(c map[string]any) []string {
	a, _, _ := unstructured.NestedStringSlice(c, "args")
	return a
}

// allContainers lists every container and init container of every pod
// template.
func (o objects) allContainers() []map[string]any {
	var out []map[string]any
	for _, obj := range o {
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", field)
			for _, c := range cs {
				out = append(out, c.(map[string]any))
			}
		}
	}
	return out
}

// nested reads a value of any type, for comparisons.
func nested(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return v
}

// asYAML compares structured values by their YAML form.
func asYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

const (
	renderRelease   = "tessera"
	renderNamespace = "gpu-system"
	appVersionImage = "ghcr.io/tessera-gpu/tessera:0.1.0"
	installLibArgs  = "install-lib --from /usr/local/lib/tessera/libtessera-intercept.so --to /var/lib/tessera/lib"
	interceptArg    = "--intercept-library=/var/lib/tessera/lib/libtessera-intercept.so"
)

// TestChartRenders renders each value set and checks what it must make.
func TestChartRenders(t *testing.T) {
	h := newHelm(t)
	checks := map[string]func(t *testing.T, o objects){
		"defaults":            checkDefaults,
		"cert-manager":        checkCertManager(""),
		"cert-manager-issuer": checkCertManager("ClusterIssuer/company-ca"),
		"monitors":            checkMonitors,
		"pools":               checkPools,
		"custom-image":        checkCustomImage,
		"no-intercept":        checkNoIntercept,
	}
	for _, s := range valueSets {
		t.Run(s.name, func(t *testing.T) {
			check := checks[s.name]
			if check == nil {
				t.Fatalf("no check for value set %s", s.name)
			}
			objs, err := h.template(t, renderRelease, renderNamespace, s)
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range objs {
				if ns := obj.GetNamespace(); ns != "" && ns != renderNamespace {
					t.Errorf("%s %s: namespace %s, want the release's %s", obj.GetKind(), obj.GetName(), ns, renderNamespace)
				}
				if obj.GetKind() == "CustomResourceDefinition" {
					t.Errorf("helm template rendered CRD %s: CRDs belong in crds/", obj.GetName())
				}
			}
			checkNonRoot(t, objects(objs))
			check(t, objects(objs))
		})
	}
}

// checkNonRoot: the scheduler and webhook run as user 65532 with a
// read-only root and no capabilities; the agent is privileged as root.
func checkNonRoot(t *testing.T, o objects) {
	t.Helper()
	for _, name := range []string{"tessera-scheduler", "tessera-webhook"} {
		d := o.find("Deployment", name)
		if d == nil {
			continue
		}
		c := podSpec(t, d)["containers"].([]any)[0].(map[string]any)
		sc, _ := c["securityContext"].(map[string]any)
		want := map[string]any{"runAsNonRoot": true, "runAsUser": int64(65532), "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false}
		for k, v := range want {
			if sc[k] != v {
				t.Errorf("%s: securityContext.%s = %v, want %v", name, k, sc[k], v)
			}
		}
		if drop := nested(sc, "capabilities", "drop"); asYAML(drop) != asYAML([]any{"ALL"}) {
			t.Errorf("%s: capabilities.drop = %v, want [ALL]", name, drop)
		}
	}
	for _, ds := range o.ofKind("DaemonSet") {
		c := container(t, podSpec(t, ds), "agent")
		if p := nested(c, "securityContext", "privileged"); p != true {
			t.Errorf("%s: agent privileged = %v, want true", ds.GetName(), p)
		}
		if u := nested(c, "securityContext", "runAsUser"); u != int64(0) {
			t.Errorf("%s: agent runAsUser = %v, want 0 (the image's user is 65532)", ds.GetName(), u)
		}
	}
}

func checkDefaults(t *testing.T, o objects) {
	sched := o.get(t, "Deployment", "tessera-scheduler")
	if r := nested(sched.Object, "spec", "replicas"); r != int64(2) {
		t.Errorf("scheduler replicas = %v, want 2", r)
	}
	sa := args(container(t, podSpec(t, sched), "scheduler"))
	for _, want := range []string{"scheduler", "--name=tessera", "--leader-elect-namespace=" + renderNamespace, "--leader-elect-identity=$(POD_NAME)"} {
		if !slices.Contains(sa, want) {
			t.Errorf("scheduler args %v lack %s", sa, want)
		}
	}
	role := o.get(t, "Role", "tessera-scheduler")
	if names := nested(role.Object, "rules"); !strings.Contains(asYAML(names), "- tessera-scheduler\n") {
		t.Errorf("scheduler Role does not name the Lease tessera-scheduler:\n%s", asYAML(names))
	}
	ds := o.get(t, "DaemonSet", "tessera-agent-default")
	spec := podSpec(t, ds)
	if sel := spec["nodeSelector"]; asYAML(sel) != asYAML(map[string]any{"tessera.io/gpu-node": "true"}) {
		t.Errorf("agent nodeSelector = %v", sel)
	}
	agent := container(t, spec, "agent")
	aa := args(agent)
	for _, want := range []string{"agent", "--source=local", "--sharing=shared", "--install-crd=false", interceptArg} {
		if !slices.Contains(aa, want) {
			t.Errorf("agent args %v lack %s", aa, want)
		}
	}
	install := container(t, spec, "install-lib")
	if got := strings.Join(args(install), " "); got != installLibArgs {
		t.Errorf("install-lib args = %q, want %q", got, installLibArgs)
	}
	for _, c := range []map[string]any{agent, install} {
		if c["image"] != appVersionImage {
			t.Errorf("%s image = %v, want %s (the chart's appVersion)", c["name"], c["image"], appVersionImage)
		}
		if !strings.Contains(asYAML(c["volumeMounts"]), "mountPath: /var/lib/tessera\n  name: state\n") {
			t.Errorf("%s does not mount the state volume at /var/lib/tessera: %s", c["name"], asYAML(c["volumeMounts"]))
		}
	}
	if !strings.Contains(asYAML(spec["volumes"]), "hostPath:\n    path: /var/lib/tessera\n    type: DirectoryOrCreate\n  name: state\n") {
		t.Errorf("state volume is not the host's /var/lib/tessera: %s", asYAML(spec["volumes"]))
	}
	if rules := asYAML(nested(o.get(t, "ClusterRole", "tessera-agent").Object, "rules")); strings.Contains(rules, "customresourcedefinitions") || strings.Contains(rules, "resourceslices") {
		t.Errorf("agent ClusterRole grants CRD or ResourceSlice access without agent.installCRD or agent.draPublish:\n%s", rules)
	}
	if rules := asYAML(nested(o.get(t, "ClusterRole", "tessera-agent").Object, "rules")); strings.Contains(rules, "resourceclaims") {
		t.Errorf("agent ClusterRole reads ResourceClaims without agent.dra:\n%s", rules)
	}
	if slices.Contains(aa, "--dra-publish") || slices.Contains(aa, "--dra") {
		t.Errorf("agent args %v publish DRA devices or serve the DRA plugin by default", aa)
	}
	if v := asYAML(spec["volumes"]); strings.Contains(v, "/var/lib/kubelet/plugins") {
		t.Errorf("agent mounts kubelet's plugin folders without agent.dra: %s", v)
	}
	for _, kind := range []string{"DeviceClass", "ServiceMonitor", "PodMonitor", "PrometheusRule", "Issuer", "Certificate", "Namespace"} {
		if got := o.ofKind(kind); len(got) > 0 {
			t.Errorf("defaults render %s", got.names())
		}
	}
	for _, cm := range o.ofKind("ConfigMap") {
		if _, ok := cm.GetLabels()["grafana_dashboard"]; ok {
			t.Errorf("defaults render dashboard ConfigMap %s", cm.GetName())
		}
	}
	checkChartCertificate(t, o, "tessera-webhook.gpu-system.svc")
}

// checkChartCertificate: the Secret holds a certificate for host signed by
// the CA in the webhook configuration's caBundle.
func checkChartCertificate(t *testing.T, o objects, host string) {
	t.Helper()
	secret := o.get(t, "Secret", "tessera-webhook-tls")
	if typ := nested(secret.Object, "type"); typ != "kubernetes.io/tls" {
		t.Errorf("Secret type = %v", typ)
	}
	data := map[string][]byte{}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		s, _, _ := unstructured.NestedString(secret.Object, "data", k)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			t.Fatalf("Secret data %s: %v (%d bytes)", k, err, len(b))
		}
		data[k] = b
	}
	mwc := o.get(t, "MutatingWebhookConfiguration", "tessera-webhook")
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	if len(hooks) != 3 {
		t.Errorf("%d webhooks, want 3 (pods, Jobs and JobSets)", len(hooks))
	}
	for _, h := range hooks {
		bundle, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
		if ca, _ := base64.StdEncoding.DecodeString(bundle); string(ca) != string(data["ca.crt"]) {
			t.Errorf("webhook %v: caBundle differs from the Secret's ca.crt", h.(map[string]any)["name"])
		}
	}
	if err := verifyCert(data["tls.crt"], data["ca.crt"], host); err != nil {
		t.Error(err)
	}
	if ann := mwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; ann != "" {
		t.Errorf("webhook configuration asks cert-manager to inject %s without certManager.enabled", ann)
	}
}

// verifyCert checks that the PEM certificate crt is valid for host under
// the PEM CA ca.
func verifyCert(crt, ca []byte, host string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("ca.crt holds no PEM certificate")
	}
	block, _ := pem.Decode(crt)
	if block == nil {
		return fmt.Errorf("tls.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("tls.crt: %w", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
		return fmt.Errorf("serving certificate for %s: %w", host, err)
	}
	return nil
}

func checkCertManager(issuer string) func(t *testing.T, o objects) {
	return func(t *testing.T, o objects) {
		if s := o.find("Secret", "tessera-webhook-tls"); s != nil {
			t.Errorf("the chart made the Secret cert-manager should make")
		}
		cert := o.get(t, "Certificate", "tessera-webhook")
		if got := nested(cert.Object, "spec", "secretName"); got != "tessera-webhook-tls" {
			t.Errorf("Certificate secretName = %v", got)
		}
		if got := asYAML(nested(cert.Object, "spec", "dnsNames")); got != asYAML([]any{"tessera-webhook.gpu-system.svc"}) {
			t.Errorf("Certificate dnsNames = %s", got)
		}
		ref := fmt.Sprintf("%v/%v", nested(cert.Object, "spec", "issuerRef", "kind"), nested(cert.Object, "spec", "issuerRef", "name"))
		issuers := o.ofKind("Issuer")
		if issuer == "" {
			if len(issuers) != 1 || nested(issuers[0].Object, "spec", "selfSigned") == nil || ref != "Issuer/"+issuers[0].GetName() {
				t.Errorf("want one self-signed Issuer that the Certificate names; issuers %s, issuerRef %s", issuers.names(), ref)
			}
		} else if len(issuers) != 0 || ref != issuer {
			t.Errorf("want issuerRef %s and no Issuer; got %s and %s", issuer, ref, issuers.names())
		}
		mwc := o.get(t, "MutatingWebhookConfiguration", "tessera-webhook")
		if ann := mwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; ann != "gpu-system/tessera-webhook" {
			t.Errorf("inject-ca-from = %q, want gpu-system/tessera-webhook", ann)
		}
		if b := nested(mwc.Object, "webhooks"); strings.Contains(asYAML(b), "caBundle") {
			t.Errorf("caBundle set with cert-manager")
		}
	}
}

func checkMonitors(t *testing.T, o objects) {
	sm := o.get(t, "ServiceMonitor", "tessera-scheduler")
	svc := o.get(t, "Service", "tessera-scheduler-metrics")
	if !selects(nested(sm.Object, "spec", "selector", "matchLabels"), svc.GetLabels()) {
		t.Errorf("ServiceMonitor selector %v does not select the metrics Service %v", nested(sm.Object, "spec", "selector"), svc.GetLabels())
	}
	sched := o.get(t, "Deployment", "tessera-scheduler")
	if !selects(nested(svc.Object, "spec", "selector"), nestedLabels(sched)) {
		t.Errorf("metrics Service does not select the scheduler pods")
	}
	if p := asYAML(nested(svc.Object, "spec", "ports")); !strings.Contains(p, "targetPort: metrics") {
		t.Errorf("metrics Service ports: %s", p)
	}
	pm := o.get(t, "PodMonitor", "tessera-agent")
	if !selects(nested(pm.Object, "spec", "selector", "matchLabels"), nestedLabels(o.get(t, "DaemonSet", "tessera-agent-default"))) {
		t.Errorf("PodMonitor does not select the agent pods")
	}
	if iv := asYAML(nested(pm.Object, "spec", "podMetricsEndpoints")); !strings.Contains(iv, "interval: 15s") || !strings.Contains(iv, "port: metrics") {
		t.Errorf("PodMonitor endpoints: %s", iv)
	}
	if h := asYAML(nested(pm.Object, "spec", "podMetricsEndpoints")); !strings.Contains(h, "honorLabels: true") {
		t.Errorf("PodMonitor does not honour the agent's namespace, pod and container labels: %s", h)
	}
	// The jobs the monitors name are those the rules' up alerts select.
	var jobs []string
	for _, eps := range []any{nested(sm.Object, "spec", "endpoints"), nested(pm.Object, "spec", "podMetricsEndpoints")} {
		for _, ep := range eps.([]any) {
			rs, _, _ := unstructured.NestedSlice(ep.(map[string]any), "relabelings")
			for _, r := range rs {
				if r := r.(map[string]any); r["targetLabel"] == "job" {
					jobs = append(jobs, fmt.Sprint(r["replacement"]))
				}
			}
		}
	}
	if !sameSet(jobs, monitorJobs()) {
		t.Errorf("monitors name the jobs %v, want %v", jobs, monitorJobs())
	}
	for _, obj := range []*unstructured.Unstructured{sm, pm} {
		if obj.GetAPIVersion() != "monitoring.coreos.com/v1" {
			t.Errorf("%s apiVersion %s", obj.GetKind(), obj.GetAPIVersion())
		}
	}
	checkDashboardConfigMaps(t, o, renderNamespace)
	checkPrometheusRule(t, o)
}

// checkDashboardConfigMaps: one ConfigMap per dashboard file in ns, with
// the file as it is, the sidecar's label and the values' annotations.
func checkDashboardConfigMaps(t *testing.T, o objects, ns string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("dashboards: %v %v", files, err)
	}
	var withLabel int
	for _, cm := range o.ofKind("ConfigMap") {
		if cm.GetLabels()["grafana_dashboard"] == "1" {
			withLabel++
		}
	}
	if withLabel != len(files) {
		t.Errorf("%d ConfigMaps with grafana_dashboard=1, want one per dashboard (%d)", withLabel, len(files))
	}
	for _, f := range files {
		base := filepath.Base(f)
		cm := o.get(t, "ConfigMap", "tessera-dashboard-"+strings.TrimPrefix(strings.TrimSuffix(base, ".json"), "tessera-"))
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(cm.Object, "data", base); got != string(want) {
			t.Errorf("ConfigMap %s: data[%s] differs from %s (%d bytes, want %d)", cm.GetName(), base, f, len(got), len(want))
		}
		if cm.GetNamespace() != ns || cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetAnnotations()["grafana_folder"] != "Tessera" {
			t.Errorf("ConfigMap %s: namespace %s, labels %v, annotations %v", cm.GetName(), cm.GetNamespace(), cm.GetLabels(), cm.GetAnnotations())
		}
	}
}

// checkPrometheusRule: the PrometheusRule's groups are the rule file's.
func checkPrometheusRule(t *testing.T, o objects) {
	t.Helper()
	pr := o.get(t, "PrometheusRule", "tessera")
	if pr.GetAPIVersion() != "monitoring.coreos.com/v1" || pr.GetLabels()["release"] != "prom" {
		t.Errorf("PrometheusRule: apiVersion %s, labels %v", pr.GetAPIVersion(), pr.GetLabels())
	}
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if got, want := asYAML(nested(pr.Object, "spec")), asYAML(file); got != want {
		t.Errorf("PrometheusRule spec differs from %s:\n%s", rulesFile, firstDiff(got, want))
	}
}

func nestedLabels(obj *unstructured.Unstructured) map[string]string {
	l, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
	return l
}

// selects reports whether a label selector (map) matches labels.
func selects(selector any, labels map[string]string) bool {
	m, ok := selector.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k, v := range m {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkPools(t *testing.T, o objects) {
	if got := len(o.ofKind("DaemonSet")); got != 3 {
		t.Fatalf("%d DaemonSets, want one per pool (3): %s", got, o.ofKind("DaemonSet").names())
	}
	cases := []struct {
		pool, pool2 string
		want        []string
	}{
		{"a100", "a100", []string{"--sharing=shared", "--slots-per-gpu=8", "--source=local"}},
		{"h100-mps", "h100", []string{"--sharing=mps", "--mps-control=/usr/bin/nvidia-cuda-mps-control"}},
		{"l4", "l4", []string{"--sharing=exclusive", "--source=sim:2xL4", "--compute-fail=closed"}},
	}
	var selectors []string
	for _, c := range cases {
		ds := o.get(t, "DaemonSet", "tessera-agent-"+c.pool)
		spec := podSpec(t, ds)
		aa := args(container(t, spec, "agent"))
		for _, w := range append(c.want, "--install-crd=true", interceptArg, "--dra-publish", "--dra") {
			if !slices.Contains(aa, w) {
				t.Errorf("pool %s: args %v lack %s", c.pool, aa, w)
			}
		}
		checkDRAPluginMounts(t, c.pool, spec)
		sel := asYAML(spec["nodeSelector"])
		if want := asYAML(map[string]any{"pool": c.pool2, "tessera.io/gpu-node": "true"}); sel != want {
			t.Errorf("pool %s: nodeSelector\n%s want (the pool's merged with agent.nodeSelector)\n%s", c.pool, sel, want)
		}
		selectors = append(selectors, fmt.Sprint(nested(ds.Object, "spec", "selector")))
		tol := asYAML(spec["tolerations"])
		if c.pool == "l4" != strings.Contains(tol, "dedicated") || c.pool != "l4" != strings.Contains(tol, "nvidia.com/gpu") {
			t.Errorf("pool %s: tolerations %s", c.pool, tol)
		}
	}
	slices.Sort(selectors)
	if len(slices.Compact(selectors)) != 3 {
		t.Errorf("DaemonSet selectors overlap: %v", selectors)
	}
	rules := asYAML(nested(o.get(t, "ClusterRole", "tessera-agent").Object, "rules"))
	if !strings.Contains(rules, "resourceNames:\n  - gpunodes.tessera.io\n  - gpuuses.tessera.io\n  resources:\n  - customresourcedefinitions\n  verbs:\n  - get\n  - update\n") {
		t.Errorf("agent ClusterRole with installCRD lacks get/update on the GPUNode and GPUUse CRDs alone:\n%s", rules)
	}
	if !strings.Contains(rules, "- resource.k8s.io\n  resources:\n  - resourceslices\n") {
		t.Errorf("agent ClusterRole with draPublish lacks resourceslices:\n%s", rules)
	}
	checkDRARules(t, o)
	checkDeviceClasses(t, o)
}

// checkDRAPluginMounts: with agent.dra the agent sees kubelet's plugin
// folder and registration folder (under kubelet's root folder, the
// default /var/lib/kubelet), and the CDI folder, at their host paths
// (kubelet and the runtime use the paths the plugin gives), and the
// plugin's flags name the same folders.
func checkDRAPluginMounts(t *testing.T, pool string, spec map[string]any) {
	t.Helper()
	checkDRAPluginMountsUnder(t, pool, spec, "/var/lib/kubelet")
}

func checkDRAPluginMountsUnder(t *testing.T, pool string, spec map[string]any, kubeletRoot string) {
	t.Helper()
	agent := container(t, spec, "agent")
	mounts := asYAML(agent["volumeMounts"])
	volumes := asYAML(spec["volumes"])
	for _, m := range []struct{ name, path, typ string }{
		{"dra-plugin", kubeletRoot + "/plugins/gpu.tessera.io", "DirectoryOrCreate"},
		{"plugins-registry", kubeletRoot + "/plugins_registry", "Directory"},
		{"cdi", "/var/run/cdi", "DirectoryOrCreate"},
	} {
		if !strings.Contains(mounts, "mountPath: "+m.path+"\n  name: "+m.name+"\n") {
			t.Errorf("pool %s: agent does not mount %s at %s: %s", pool, m.name, m.path, mounts)
		}
		if !strings.Contains(volumes, "hostPath:\n    path: "+m.path+"\n    type: "+m.typ+"\n  name: "+m.name+"\n") {
			t.Errorf("pool %s: volume %s is not the host's %s (%s): %s", pool, m.name, m.path, m.typ, volumes)
		}
	}
	aa := args(agent)
	for _, w := range []string{"--dra-plugin-dir=" + kubeletRoot + "/plugins/gpu.tessera.io", "--dra-registry-dir=" + kubeletRoot + "/plugins_registry"} {
		if !slices.Contains(aa, w) {
			t.Errorf("pool %s: agent args %v lack %s", pool, aa, w)
		}
	}
	if !strings.Contains(volumes, "hostPath:\n    path: "+kubeletRoot+"/pod-resources\n  name: pod-resources\n") {
		t.Errorf("pool %s: volume pod-resources is not %s/pod-resources: %s", pool, kubeletRoot, volumes)
	}
}

// checkDRARules: with agent.dra the agent may read ResourceClaims (the
// kubeletplugin helper gets each claim kubelet names) and nothing more on
// them, and keep its ResourceSlices.
func checkDRARules(t *testing.T, o objects) {
	t.Helper()
	rules := asYAML(nested(o.get(t, "ClusterRole", "tessera-agent").Object, "rules"))
	if !strings.Contains(rules, "- resource.k8s.io\n  resources:\n  - resourceclaims\n  verbs:\n  - get\n") {
		t.Errorf("agent ClusterRole with agent.dra lacks get (alone) on resourceclaims:\n%s", rules)
	}
	if !strings.Contains(rules, "- resource.k8s.io\n  resources:\n  - resourceslices\n") {
		t.Errorf("agent ClusterRole with agent.dra lacks resourceslices:\n%s", rules)
	}
}

// TestChartDRAImpliesPublish: agent.dra alone serves the plugin and
// publishes the slices: --dra (which implies --dra-publish in the agent),
// the plugin folders, the RBAC of both and the DeviceClasses.
func TestChartDRAImpliesPublish(t *testing.T) {
	h := newHelm(t)
	objs, err := h.template(t, renderRelease, renderNamespace, valueSet{name: "dra", set: []string{"agent.dra=true"}})
	if err != nil {
		t.Fatal(err)
	}
	o := objects(objs)
	spec := podSpec(t, o.get(t, "DaemonSet", "tessera-agent-default"))
	if aa := args(container(t, spec, "agent")); !slices.Contains(aa, "--dra") {
		t.Errorf("agent args %v lack --dra", aa)
	}
	checkDRAPluginMounts(t, "default", spec)
	checkDRARules(t, o)
	checkDeviceClasses(t, o)
}

// TestChartKubeletRootDir: agent.kubeletRootDir moves every kubelet
// folder under kubelet's root (pod-resources, the DRA plugin's folder and
// registration folder, mounted at their host paths and named in the
// flags); the device-plugin folder, fixed in kubelet, stays.
func TestChartKubeletRootDir(t *testing.T) {
	h := newHelm(t)
	objs, err := h.template(t, renderRelease, renderNamespace, valueSet{name: "kubelet-root",
		set: []string{"agent.dra=true", "agent.kubeletRootDir=/data/kubelet"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := podSpec(t, objects(objs).get(t, "DaemonSet", "tessera-agent-default"))
	checkDRAPluginMountsUnder(t, "default", spec, "/data/kubelet")
	volumes := asYAML(spec["volumes"])
	if strings.Contains(volumes, "/var/lib/kubelet/p") {
		t.Errorf("agent.kubeletRootDir=/data/kubelet: volumes still under /var/lib/kubelet: %s", volumes)
	}
	if !strings.Contains(volumes, "path: /var/lib/kubelet/device-plugins\n") {
		t.Errorf("device-plugins volume moved with agent.kubeletRootDir (kubelet's device-plugin folder is fixed): %s", volumes)
	}
}

// checkDeviceClasses: with agent.draPublish the chart installs exactly
// the DeviceClasses of kube/dra (the extended resource tessera.io/gpu
// mapped to the whole-GPU class), so the two cannot drift.
func checkDeviceClasses(t *testing.T, o objects) {
	t.Helper()
	want := dra.DeviceClasses(workload.ResourceGPU)
	got := o.ofKind("DeviceClass")
	if len(got) != len(want) {
		t.Fatalf("%d DeviceClasses (%s), want %d", len(got), got.names(), len(want))
	}
	for _, w := range want {
		dc := o.get(t, "DeviceClass", w.Name)
		var spec resourceapi.DeviceClassSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(dc.Object["spec"].(map[string]any), &spec); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(spec, w.Spec) {
			t.Errorf("DeviceClass %s spec %+v, want kube/dra's %+v", w.Name, spec, w.Spec)
		}
	}
}

func checkCustomImage(t *testing.T, o objects) {
	cs := o.allContainers()
	if len(cs) != 4 { // scheduler, agent, install-lib, webhook
		t.Errorf("%d containers, want 4", len(cs))
	}
	for _, c := range cs {
		if c["image"] != "registry.example.com/gpu/tessera:v9.9.9" || c["imagePullPolicy"] != "Always" {
			t.Errorf("container %s: image %v pull %v", c["name"], c["image"], c["imagePullPolicy"])
		}
	}
	for _, obj := range append(o.ofKind("Deployment"), o.ofKind("DaemonSet")...) {
		if got := asYAML(podSpec(t, obj)["imagePullSecrets"]); got != asYAML([]any{map[string]any{"name": "regcred"}}) {
			t.Errorf("%s imagePullSecrets %s", obj.GetName(), got)
		}
	}
	// schedulerName reaches the scheduler, the webhook, its match
	// condition and the Lease the scheduler may update.
	if a := args(container(t, podSpec(t, o.get(t, "Deployment", "tessera-scheduler")), "scheduler")); !slices.Contains(a, "--name=gpu") {
		t.Errorf("scheduler args %v", a)
	}
	if a := args(container(t, podSpec(t, o.get(t, "Deployment", "tessera-webhook")), "webhook")); !slices.Contains(a, "--scheduler-name=gpu") {
		t.Errorf("webhook args %v", a)
	}
	if mc := asYAML(nested(o.get(t, "MutatingWebhookConfiguration", "tessera-webhook").Object, "webhooks")); !strings.Contains(mc, "object.spec.schedulerName == 'gpu'") ||
		!strings.Contains(mc, "object.spec.template.spec.schedulerName == 'gpu'") {
		t.Errorf("match conditions do not name scheduler gpu:\n%s", mc)
	}
	if r := asYAML(nested(o.get(t, "Role", "tessera-scheduler").Object, "rules")); !strings.Contains(r, "- gpu-scheduler\n") {
		t.Errorf("Role does not name the Lease gpu-scheduler:\n%s", r)
	}
}

func checkNoIntercept(t *testing.T, o objects) {
	spec := podSpec(t, o.get(t, "DaemonSet", "tessera-agent-default"))
	if _, ok := spec["initContainers"]; ok {
		t.Errorf("init containers without agent.interceptLibrary")
	}
	if aa := args(container(t, spec, "agent")); slices.Contains(aa, interceptArg) {
		t.Errorf("agent args %v name the library", aa)
	}
	for _, obj := range o {
		if strings.Contains(obj.GetName(), "webhook") {
			t.Errorf("%s %s rendered with webhook.enabled=false", obj.GetKind(), obj.GetName())
		}
	}
	if r := nested(o.get(t, "Deployment", "tessera-scheduler").Object, "spec", "replicas"); !reflect.DeepEqual(r, int64(1)) {
		t.Errorf("replicas %v, want 1", r)
	}
}

// TestChartDashboardsNamespace: the dashboards' ConfigMaps go where
// Grafana's sidecar looks when the values say so.
func TestChartDashboardsNamespace(t *testing.T) {
	h := newHelm(t)
	objs, err := h.template(t, renderRelease, renderNamespace, valueSet{name: "grafana-ns",
		set: []string{"monitoring.dashboards.enabled=true", "monitoring.dashboards.namespace=grafana", "monitoring.dashboards.annotations.grafana_folder=Tessera"}})
	if err != nil {
		t.Fatal(err)
	}
	checkDashboardConfigMaps(t, objects(objs), "grafana")
}
