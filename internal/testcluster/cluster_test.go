package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
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
