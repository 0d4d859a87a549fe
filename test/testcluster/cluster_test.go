package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestControlPlaneRunsFakeGPUNodes starts etcd, kube-apiserver and KWOK,
// registers a fake GPU node, binds a pod to it and waits for KWOK to run it
// and then to finish its deletion: the full loop later tests rely on.
func TestControlPlaneRunsFakeGPUNodes(t *testing.T) {
	ctx, c, _ := ForTest(t, true)
	api := &jsonClient{t: t, c: c}
	api.do(ctx, http.MethodPost, "/api/v1/nodes", map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "gpu-node-0", "annotations": map[string]string{FakeNodeAnnotation: "fake"}},
		"status": map[string]any{
			"capacity":    map[string]string{"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
			"allocatable": map[string]string{"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
		},
	}, http.StatusCreated)
	api.eventually(ctx, "node Ready", func() error {
		var n struct {
			Status struct {
				Conditions  []struct{ Type, Status string }
				Allocatable map[string]string
			}
		}
		api.get(ctx, "/api/v1/nodes/gpu-node-0", &n)
		for _, cond := range n.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				if n.Status.Allocatable["nvidia.com/gpu"] != "8" {
					return fmt.Errorf("allocatable lost: %v", n.Status.Allocatable)
				}
				return nil
			}
		}
		return fmt.Errorf("conditions %v", n.Status.Conditions)
	})
	api.do(ctx, http.MethodPost, "/api/v1/namespaces/default/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p"},
		"spec": map[string]any{
			"nodeName":   "gpu-node-0",
			"containers": []map[string]any{{"name": "c", "image": "example.invalid/none"}},
		},
	}, http.StatusCreated)
	api.eventually(ctx, "pod Running", func() error {
		var p struct{ Status struct{ Phase string } }
		api.get(ctx, "/api/v1/namespaces/default/pods/p", &p)
		if p.Status.Phase != "Running" {
			return fmt.Errorf("phase %q", p.Status.Phase)
		}
		return nil
	})
	api.do(ctx, http.MethodDelete, "/api/v1/namespaces/default/pods/p", nil, http.StatusOK)
	api.eventually(ctx, "pod deleted", func() error {
		if code := api.status(ctx, "/api/v1/namespaces/default/pods/p"); code != http.StatusNotFound {
			return fmt.Errorf("GET pod: %d", code)
		}
		return nil
	})
}

// jsonClient is a tiny JSON client for this test; Tessera's own code uses client-go.
type jsonClient struct {
	t *testing.T
	c *Cluster
}

func (r *jsonClient) request(ctx context.Context, method, path string, body any) (*http.Response, []byte) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			r.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.c.Host+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.c.HTTPClient().Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func (r *jsonClient) do(ctx context.Context, method, path string, body any, want int) {
	r.t.Helper()
	resp, data := r.request(ctx, method, path, body)
	if resp.StatusCode != want {
		r.t.Fatalf("%s %s: %s: %s", method, path, resp.Status, data)
	}
}

func (r *jsonClient) get(ctx context.Context, path string, into any) {
	r.t.Helper()
	resp, data := r.request(ctx, http.MethodGet, path, nil)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET %s: %s: %s", path, resp.Status, data)
	}
	if err := json.Unmarshal(data, into); err != nil {
		r.t.Fatalf("GET %s: %v", path, err)
	}
}

func (r *jsonClient) status(ctx context.Context, path string) int {
	r.t.Helper()
	resp, _ := r.request(ctx, http.MethodGet, path, nil)
	return resp.StatusCode
}

// eventually polls check until it passes; the bound is a liveness guard.
func (r *jsonClient) eventually(ctx context.Context, what string, check func() error) {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.t.Fatalf("%s: %v\nkwok log:\n%s", what, err, r.c.Logs("kwok", 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRestartCompactAndUsers covers what fault-injection tests use: an API
// server restart, graceful or killed, keeps the data and the credentials;
// after an etcd compaction and a restart, a watch from an older
// resourceVersion fails with 410 Gone (its informer must list again); an
// extra user authenticates with its own kubeconfig and is named in the
// audit log.
func TestRestartCompactAndUsers(t *testing.T) {
	ctx, c, _ := ForTestWith(t, false, Options{Users: []string{"alice"}, AuditPolicy: `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources: [{group: "", resources: ["configmaps"]}]
- level: None
`})
	api := &jsonClient{t: t, c: c}
	cm := func(name string) string {
		var out struct {
			Metadata struct{ ResourceVersion string }
		}
		resp, data := api.request(ctx, http.MethodPost, "/api/v1/namespaces/default/configmaps", map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create configmap %s: %s: %s", name, resp.Status, data)
		}
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out.Metadata.ResourceVersion
	}
	cm("a")
	old := cm("b") // the latest write: even a watch this fresh must expire
	if err := c.StopAPIServer(false); err != nil {
		t.Fatal(err)
	}
	rev, err := c.CompactEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := strconv.ParseInt(old, 10, 64); rev <= r {
		t.Errorf("compacted at revision %d, not after the first write (%s)", rev, old)
	}
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.StartAPIServer(ctx); err == nil {
		t.Error("StartAPIServer while it runs: no error")
	}
	if err := c.RestartAPIServer(ctx, true); err != nil {
		t.Fatalf("restart (killed): %v", err)
	}
	if code := api.status(ctx, "/api/v1/namespaces/default/configmaps/a"); code != http.StatusOK {
		t.Fatalf("after restarts, GET configmap a: %d", code)
	}
	// A watch from before the compaction is refused: HTTP 410, or an ERROR
	// event with code 410 on the stream.
	resp, data := api.request(ctx, http.MethodGet, "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=5&resourceVersion="+old, nil)
	var ev struct {
		Type   string
		Object struct{ Code int }
	}
	if resp.StatusCode != http.StatusGone {
		line, _, _ := strings.Cut(string(data), "\n")
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type != "ERROR" || ev.Object.Code != http.StatusGone {
			t.Errorf("watch from resourceVersion %s after compaction and restart: %s %q, want 410 Gone", old, resp.Status, line)
		}
	}

	kc, err := c.KubeconfigFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	alice := kubernetes.NewForConfigOrDie(cfg)
	if _, err := alice.CoreV1().ConfigMaps("default").Get(ctx, "b", metav1.GetOptions{}); err != nil {
		t.Fatalf("alice reads a configmap: %v", err)
	}
	if _, err := c.KubeconfigFor("bob"); err == nil {
		t.Error("KubeconfigFor(bob), not a user of the cluster: no error")
	}
	audit, err := os.ReadFile(c.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), `"username":"alice"`) {
		t.Errorf("audit log names no request by alice:\n%.2000s", audit)
	}
}
