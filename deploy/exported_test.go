package deploy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/agent/metrics"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/hostd"
	"github.com/tessera-gpu/tessera/hostd/server"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/scheduler"
)

// exported is what Tessera's /metrics endpoints expose: each sample name
// (a histogram's _bucket, _sum and _count) with the label names its series
// carry.
type exported map[string]map[string]bool

func (e exported) add(name string, labels ...string) {
	if e[name] == nil {
		e[name] = map[string]bool{}
	}
	for _, l := range labels {
		e[name][l] = true
	}
}

// family adds a metric family of the given type: a histogram or summary
// as the sample names Prometheus stores.
func (e exported) family(name string, typ dto.MetricType, labels []string) {
	switch typ {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		e.add(name+"_bucket", append(labels, "le")...)
		e.add(name+"_sum", labels...)
		e.add(name+"_count", labels...)
	case dto.MetricType_SUMMARY:
		e.add(name, append(labels, "quantile")...)
		e.add(name+"_sum", labels...)
		e.add(name+"_count", labels...)
	default:
		e.add(name, labels...)
	}
}

// scrape reads a /metrics answer (the text format) into e.
func (e exported) scrape(t *testing.T, what string, h http.Handler) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	e.get(t, what, srv.URL+"/metrics")
}

func (e exported) get(t *testing.T, what, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET /metrics: %s %v\n%s", what, resp.Status, err, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s: /metrics is not the text format: %v", what, err)
	}
	for name, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		var ls []string
		for l := range labels {
			ls = append(ls, l)
		}
		e.family(name, mf.GetType(), ls)
	}
}

// describe adds every metric a collector describes, also those with no
// series yet (a vector before its first child). Gather tells the type of
// what is exposed; of the rest a *HistogramVec or *SummaryVec is
// expanded, anything else taken as one sample name.
func (e exported) describe(t *testing.T, what string, c prometheus.Collector) {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		name, labels, err := parseDesc(d)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		switch c.(type) {
		case *prometheus.HistogramVec:
			e.family(name, dto.MetricType_HISTOGRAM, labels)
		case *prometheus.SummaryVec:
			e.family(name, dto.MetricType_SUMMARY, labels)
		default:
			if _, histogram := e[name+"_bucket"]; histogram {
				e.family(name, dto.MetricType_HISTOGRAM, labels)
			} else if _, summary := e[name+"_count"]; !summary {
				e.add(name, labels...)
			}
		}
	}
}

var (
	descName   = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)
	constName  = regexp.MustCompile(`(?:^|,)([a-zA-Z_][a-zA-Z0-9_]*)="`)
)

// parseDesc reads a descriptor's name and label names from its String
// (client_golang keeps them unexported): Desc{fqName: "...", help: "...",
// unit: "...", constLabels: {a="x"}, variableLabels: {b,c(d)}}.
func parseDesc(d *prometheus.Desc) (string, []string, error) {
	if err := d.Err(); err != nil {
		return "", nil, err
	}
	s := d.String()
	n := descName.FindStringSubmatch(s)
	l := descLabels.FindStringSubmatch(s)
	if n == nil || l == nil {
		return "", nil, fmt.Errorf("cannot read descriptor %s (has client_golang changed Desc.String?)", s)
	}
	var labels []string
	for _, m := range constName.FindAllStringSubmatch(l[1], -1) {
		labels = append(labels, m[1])
	}
	if l[2] != "" {
		for _, v := range strings.Split(l[2], ",") {
			labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(v, "c("), ")"))
		}
	}
	return n[1], labels, nil
}

// tesseraExports scrapes the /metrics of the node agent (its real handler
// and collector over a simulated GPU with one container's shares and
// usage), the Kubernetes scheduler (the registry it registers on, served
// as `tessera scheduler` serves it) and the host daemon (its real API
// handler), and adds what their collectors describe. Prometheus's own up
// series (job, instance) is added: the rules use it.
func tesseraExports(t *testing.T) exported {
	t.Helper()
	e := exported{}
	e.add("up", "job", "instance")

	// The node agent.
	cat := catalog.Default()
	src, err := discovery.Open("sim:2xH100", cat)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := src.Discover(context.Background())
	if err != nil || len(nodes) != 1 {
		t.Fatalf("sim:2xH100: %v nodes, %v", len(nodes), err)
	}
	node := agentNode{inv: nodes[0]}
	node.inv.Name = "gpu-0"
	col := metrics.NewCollector(node, metrics.Simulated{Node: node}, agentUsage{node}, nil)
	h, err := metrics.Handler(col)
	if err != nil {
		t.Fatal(err)
	}
	e.scrape(t, "agent", h)
	e.describe(t, "agent", col)

	// The Kubernetes scheduler: New registers its metrics; the CLI adds Go
	// and process metrics to the same registry.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rec := &recordingRegisterer{Registerer: reg}
	if _, err := scheduler.New(scheduler.Config{Client: fake.NewClientset(), Metrics: rec, Log: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	if len(rec.collectors) == 0 {
		t.Fatal("scheduler.New registered no metric")
	}
	e.scrape(t, "scheduler", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	for _, c := range rec.collectors {
		e.describe(t, "scheduler", c)
	}

	// The host daemon (tessera up), over TCP as --http serves it.
	d, err := hostd.New(hostd.Config{StateDir: t.TempDir(), Source: src.Name(), Simulated: true, Nodes: nodes, Catalog: cat,
		Supervisor: []string{"/bin/true"}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	hh, err := server.Handler(d, server.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(hh)
	hs.Config.ConnContext = server.ConnContext
	hs.Start()
	defer hs.Close()
	e.get(t, "host daemon", hs.URL+"/metrics")
	return e
}

// recordingRegisterer registers on a registry and keeps the collectors,
// to read their descriptors.
type recordingRegisterer struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
	r.Registerer.MustRegister(cs...)
}

// agentNode is a node agent's state as the metrics collector reads it:
// discovered GPUs, one container holding a share of the first.
type agentNode struct{ inv inventory.Node }

func (n agentNode) Inventory() inventory.Node { return n.inv }

func (n agentNode) Allocations() []checkpoint.Entry {
	return []checkpoint.Entry{{Key: "tsr-1", Namespace: "ml", Pod: "train", Container: "main",
		GPUs: []binding.Share{{UUID: n.inv.GPUs[0].UUID, ComputeMilli: 250, ComputeLimitMilli: 800, MemoryMiB: 1024, MemoryLimitMiB: 2048}}}}
}

// agentUsage is the node arbiter's report for that container.
type agentUsage struct{ n agentNode }

func (u agentUsage) Usage(context.Context) ([]metrics.ContainerMemory, error) {
	return []metrics.ContainerMemory{{Key: "tsr-1", GPUUUID: u.n.inv.GPUs[0].UUID, MemoryUsedBytes: 1 << 20}}, nil
}

func (u agentUsage) ComputeShares() []metrics.ContainerCompute {
	return []metrics.ContainerCompute{{Key: "tsr-1", GPUUUID: u.n.inv.GPUs[0].UUID, ShareMilli: 300, DemandMilli: 400, Measured: true}}
}

// TestTesseraExports: the harness reads every component: the agent's GPU
// and container series, the scheduler's histograms and its per-queue
// series before any cycle (from their descriptors), the host daemon's.
func TestTesseraExports(t *testing.T) {
	e := tesseraExports(t)
	cases := []struct {
		name   string
		labels []string
	}{
		{"tessera_gpu_info", []string{"node", "gpu", "uuid", "source", "model"}},
		{"tessera_container_gpu_compute_share_ratio", []string{"namespace", "pod", "container", "measured"}},
		{"tessera_container_gpu_memory_used_bytes", []string{"node", "gpu"}},
		{"tessera_agent_metrics_source_up", []string{"source"}},
		{"tessera_scheduler_cycle_duration_seconds_bucket", []string{"le"}},
		{"tessera_scheduler_decision_duration_seconds_count", nil},
		{"tessera_scheduler_decisions_total", []string{"result"}},
		{"tessera_scheduler_queue_pending_pods", []string{"queue"}},
		{"tessera_scheduler_queue_fair_share", []string{"queue"}},
		{"tessera_host_jobs", []string{"state"}},
		{"tessera_host_gpu_free_fraction", []string{"gpu", "uuid", "model"}},
		{"go_goroutines", nil},
		{"up", []string{"job", "instance"}},
	}
	for _, c := range cases {
		labels, ok := e[c.name]
		if !ok {
			t.Errorf("%s not read", c.name)
			continue
		}
		for _, l := range c.labels {
			if !labels[l] {
				t.Errorf("%s: no label %s among %v", c.name, l, sortedKeys(labels))
			}
		}
	}
	for _, absent := range []string{"tessera_scheduler_pending_pods_bucket", "tessera_scheduler_cycle_duration_seconds"} {
		if _, ok := e[absent]; ok {
			t.Errorf("%s read: a gauge has no buckets, a histogram no plain sample", absent)
		}
	}
}

// TestParseDesc: descriptors' names and labels are read back, constant
// and variable ones, with help text that looks like the format itself.
func TestParseDesc(t *testing.T) {
	cases := []struct {
		desc   *prometheus.Desc
		name   string
		labels []string
	}{
		{prometheus.NewDesc("tessera_a", "plain", nil, nil), "tessera_a", nil},
		{prometheus.NewDesc("tessera_b", `tricky: variableLabels: {x}}, "quoted"`, []string{"node", "gpu"}, prometheus.Labels{"zone": "a,b=\"c\""}),
			"tessera_b", []string{"zone", "node", "gpu"}},
	}
	for _, c := range cases {
		name, labels, err := parseDesc(c.desc)
		if err != nil || name != c.name || !sameSet(labels, c.labels) {
			t.Errorf("%s: %q %v %v, want %q %v", c.desc, name, labels, err, c.name, c.labels)
		}
	}
	if _, _, err := parseDesc(prometheus.NewDesc("tessera_c", "x", []string{"a", "a"}, nil)); err == nil {
		t.Error("an invalid descriptor was read")
	}
}
