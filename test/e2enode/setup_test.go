package e2enode_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/tessera-gpu/tessera/test/testcluster"
	"github.com/tessera-gpu/tessera/test/toolbin"
)

// hostDirs are the host folders the chart's agent uses at fixed paths (its
// state and the interception library under /var/lib/tessera, the
// per-container state under /run/tessera). The test creates them with a
// marker and removes them after; it refuses to touch folders it did not
// create (a machine running Tessera for real).
func hostDirs() []string { return []string{"/var/lib/tessera", "/run/tessera"} }

const hostDirMarker = ".tessera-e2e-node"

// node is one real node running Tessera from its image and chart.
type node struct {
	t    *testing.T
	ctx  context.Context
	c    *testcluster.Cluster
	rn   *testcluster.RealNode
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	cfg  *rest.Config
	maps meta.RESTMapper
	// image is the Tessera image's reference, probe the probe's.
	image, probe string
}

// claimHostDirs creates hostDirs with a marker, or skips the test when one
// exists without the marker (not ours to change).
func claimHostDirs(t *testing.T) {
	t.Helper()
	for _, d := range hostDirs() {
		if _, err := os.Stat(d); err == nil {
			if _, err := os.Stat(filepath.Join(d, hostDirMarker)); err != nil {
				t.Skipf("%s exists and was not made by this test (Tessera installed on this machine?): the real-node test uses it and will not touch it", d)
			}
			if err := os.RemoveAll(d); err != nil {
				t.Fatalf("remove the previous run's %s: %v", d, err)
			}
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("create %s: %v", d, err)
		}
		if err := os.WriteFile(filepath.Join(d, hostDirMarker), nil, 0o644); err != nil {
			t.Fatalf("mark %s: %v", d, err)
		}
	}
	t.Cleanup(func() {
		for _, d := range hostDirs() {
			// Mounts the agent left (none expected once pods are gone)
			// would make RemoveAll fail: say so rather than hide it.
			if err := os.RemoveAll(d); err != nil {
				t.Errorf("remove %s: %v", d, err)
			}
		}
	})
}

// startNode brings up the control plane (with the workload controllers
// and kube-scheduler for the chart's own pods), the real node with the
// images imported, and Tessera from the rendered manifests.
func startNode(t *testing.T, gpus string, set ...string) *node {
	t.Helper()
	if why := testcluster.RealNodeUnavailable(); why != "" {
		t.Skip(why)
	}
	imgs := buildImages(t)
	claimHostDirs(t)
	// KWOK too: show-gpus counts a KWOK node beside the real one.
	ctx, c, cfg := testcluster.ForTestWith(t, true, testcluster.Options{Workloads: true})
	// kube-scheduler as a cluster runs it, its feature gates as v1.37
	// sets them: shares of Tessera's devices need no gate that is off
	// (docs/dra.md).
	if err := c.StartKubeScheduler(ctx, 0, 0); err != nil {
		t.Fatalf("start kube-scheduler: %v", err)
	}
	rn, err := c.StartRealNode(ctx, testcluster.NodeOptions{Images: []string{imgs.tessera, imgs.pause, imgs.probe}})
	if err != nil {
		t.Fatalf("start the real node: %v", err)
	}
	n := &node{t: t, ctx: ctx, c: c, rn: rn, cfg: cfg, image: imgs.tesseraRef, probe: imgs.probeRef}
	t.Cleanup(func() {
		if t.Failed() {
			n.dumpState()
		}
		n.deleteAllPods()
		rn.Stop()
	})
	if n.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if n.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.maps = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	n.label(rn.Name, map[string]string{"tessera.io/gpu-node": "true", "tessera.io/pool": "real"})
	objs := n.manifests(gpus, set...)
	n.apply(objs)
	n.kwokNode("kwok-0", "A100-80GB", 2)
	n.waitRollout()
	return n
}

// kwokNode adds a KWOK node with its GPUNode, as an agent would publish
// it, in pool "kwok". It is tainted so that the chart's pods (which must
// run on the real node) stay off it, and the test's pods select the real
// node by name.
func (n *node) kwokNode(name, model string, count int) {
	n.t.Helper()
	err := testcluster.CreateGPUNode(n.ctx, n.cs, n.dyn, testcluster.GPUNode{Name: name, Model: model, Count: count,
		Labels: map[string]string{"tessera.io/pool": "kwok"},
		Taints: []corev1.Taint{{Key: "e2e.tessera.io/kwok", Value: "true", Effect: corev1.TaintEffectNoSchedule}}})
	if err != nil {
		n.t.Fatal(err)
	}
}

// manifests renders the chart (deploy/helm/tessera, with Helm built from
// the pinned tools/cluster module) with its own webhook certificate, this
// image and simulated GPUs, kubelet's root folder (agent.kubeletRootDir,
// not /var/lib/kubelet here) and the given --set values, and adapts the
// objects to this node; each change is one a test cluster without a pod
// network needs, named where it is made.
func (n *node) manifests(gpus string, set ...string) []*unstructured.Unstructured {
	n.t.Helper()
	root := repoRoot(n.t)
	helm, err := toolbin.Binary(n.ctx, "helm")
	if err != nil {
		n.t.Fatalf("build helm: %v", err)
	}
	i := strings.LastIndex(n.image, ":")
	if i < strings.LastIndex(n.image, "/") {
		n.t.Fatalf("image reference %q has no tag", n.image)
	}
	repo, tag := n.image[:i], n.image[i+1:]
	args := []string{"template", "tessera", filepath.Join(root, "deploy", "helm", "tessera"),
		"--namespace", "tessera-system", "--include-crds",
		"--set", "createNamespace=true",
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never",
		"--set", "agent.source=sim:" + gpus,
		// The real node's kubelet keeps its folders (pod-resources, the
		// DRA plugin registry) under its own root folder.
		"--set", "agent.kubeletRootDir=" + n.kubeletRootDir(),
		// One node: one replica each (two would fight over host ports).
		"--set", "scheduler.replicas=1", "--set", "webhook.replicas=1"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.CommandContext(n.ctx, helm, args...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		n.t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	objs := decodeManifests(n.t, "helm template", out)
	host, port := n.apiServerHostPort()
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		spec := o.Object["spec"].(map[string]any)
		pod := spec["template"].(map[string]any)["spec"].(map[string]any)
		// No pod network here (loopback CNI): the chart's pods use the
		// host's, and reach the API server at its loopback address rather
		// than the kubernetes Service (no kube-proxy).
		pod["hostNetwork"] = true
		pod["dnsPolicy"] = "ClusterFirstWithHostNet"
		for _, key := range []string{"containers", "initContainers"} {
			cs, _ := pod[key].([]any)
			for _, ci := range cs {
				ctr := ci.(map[string]any)
				env, _ := ctr["env"].([]any)
				ctr["env"] = append(env,
					map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": host},
					map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": port})
			}
		}
	}
	return objs
}

// kubeletRootDir is the real node's kubelet --root-dir.
func (n *node) kubeletRootDir() string { return filepath.Join(n.rn.Root, "kubelet") }

func (n *node) apiServerHostPort() (string, string) {
	u, err := url.Parse(n.c.Host)
	if err != nil {
		n.t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

// apply creates the objects with strict field validation, CRDs first and
// waiting until they are served.
func (n *node) apply(objs []*unstructured.Unstructured) {
	n.t.Helper()
	for pass := 0; pass < 2; pass++ {
		for _, o := range objs {
			isCRD := o.GetKind() == "CustomResourceDefinition"
			if isCRD != (pass == 0) {
				continue
			}
			gvk := o.GroupVersionKind()
			var m *meta.RESTMapping
			err := waitFor(n.ctx, 60*time.Second, func() error {
				var err error
				m, err = n.maps.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					n.maps.(meta.ResettableRESTMapper).Reset()
				}
				return err
			})
			if err != nil {
				n.t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
			}
			var ri dynamic.ResourceInterface = n.dyn.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				ri = n.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
			}
			if _, err := ri.Create(n.ctx, o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil && !apierrors.IsAlreadyExists(err) {
				n.t.Fatalf("create %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
			}
		}
	}
}

// waitRollout waits until the agent, scheduler and webhook pods run and
// the agent has published the node's GPUs.
func (n *node) waitRollout() {
	n.t.Helper()
	for _, component := range []string{"agent", "scheduler", "webhook"} {
		n.waitPods("tessera-system", componentSelector(component), 1, "ready", podReady)
	}
	gpunodes := schema.GroupVersionResource{Group: "tessera.io", Version: "v1alpha1", Resource: "gpunodes"}
	n.eventually(3*time.Minute, "the agent publishes the node's GPUNode", func() error {
		_, err := n.dyn.Resource(gpunodes).Get(n.ctx, n.rn.Name, metav1.GetOptions{})
		return err
	})
}

// componentSelector selects the pods of one of the chart's components.
func componentSelector(component string) string {
	return "app.kubernetes.io/name=tessera,app.kubernetes.io/component=" + component
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPods waits until want pods matching selector satisfy ok, and returns them.
func (n *node) waitPods(ns, selector string, want int, what string, ok func(*corev1.Pod) bool) []corev1.Pod {
	n.t.Helper()
	var got []corev1.Pod
	n.eventually(4*time.Minute, fmt.Sprintf("%d pod(s) %s %s", want, selector, what), func() error {
		l, err := n.cs.CoreV1().Pods(ns).List(n.ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		got = got[:0]
		var states []string
		for i := range l.Items {
			p := &l.Items[i]
			if p.DeletionTimestamp == nil && ok(p) {
				got = append(got, *p)
			}
			states = append(states, p.Name+":"+podState(p))
		}
		if len(got) != want {
			return fmt.Errorf("%d of %d; pods: %s", len(got), want, strings.Join(states, ", "))
		}
		return nil
	})
	return got
}

// podState is a pod's phase with its waiting reasons, for messages.
func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += fmt.Sprintf(" [%s: %s]", c.Type, c.Message)
		}
	}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			s += fmt.Sprintf(" [%s waiting: %s %s]", cs.Name, w.Reason, w.Message)
		}
		if x := cs.State.Terminated; x != nil {
			s += fmt.Sprintf(" [%s exited %d: %s %s]", cs.Name, x.ExitCode, x.Reason, x.Message)
		}
	}
	return s
}

func (n *node) label(name string, labels map[string]string) {
	n.t.Helper()
	var parts []string
	for k, v := range labels {
		parts = append(parts, fmt.Sprintf("%q:%q", k, v))
	}
	patch := `{"metadata":{"labels":{` + strings.Join(parts, ",") + `}}}`
	if _, err := n.cs.CoreV1().Nodes().Patch(n.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		n.t.Fatalf("label node %s: %v", name, err)
	}
}

// eventually retries check until it passes or the bound (a liveness bound
// for a broken setup, not a performance assertion) runs out.
func (n *node) eventually(bound time.Duration, what string, check func() error) {
	n.t.Helper()
	if err := waitFor(n.ctx, bound, check); err != nil {
		n.t.Fatalf("%s: %v", what, err)
	}
}

func waitFor(ctx context.Context, bound time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not after %s: %w", bound, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// deleteAllPods deletes every pod in the test namespaces and waits until
// they are gone, so that the node's teardown finds no running container.
func (n *node) deleteAllPods() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{"default", "tessera-system"} {
		zero := int64(0)
		_ = n.cs.AppsV1().DaemonSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = n.cs.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = n.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	}
	_ = waitFor(ctx, time.Minute, func() error {
		l, err := n.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d pods left", len(l.Items))
		}
		return nil
	})
}

// dumpState logs what a failed test needs: pods, their logs and events,
// and the kubelet's log tail.
func (n *node) dumpState() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := n.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err == nil {
		for i := range l.Items {
			p := &l.Items[i]
			n.t.Logf("pod %s/%s on %q: %s", p.Namespace, p.Name, p.Spec.NodeName, podState(p))
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				n.t.Logf("  log of %s:\n%s", c.Name, n.logs(ctx, p.Namespace, p.Name, c.Name, 30))
			}
		}
	}
	if ev, err := n.cs.CoreV1().Events("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range ev.Items {
			n.t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	n.t.Logf("kubelet log tail:\n%s", n.rn.KubeletLog(40))
	n.t.Logf("kube-controller-manager log tail:\n%s", n.c.Logs("kube-controller-manager", 20))
}

// logs returns a container's log through the API server (and so the real
// kubelet's log endpoint); the error text when it cannot.
func (n *node) logs(ctx context.Context, ns, pod, container string, tail int64) string {
	opt := &corev1.PodLogOptions{Container: container}
	if tail > 0 {
		opt.TailLines = &tail
	}
	rc, err := n.cs.CoreV1().Pods(ns).GetLogs(pod, opt).Stream(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

func decodeManifests(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testcluster.DecodeManifests(data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return objs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := toolbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
