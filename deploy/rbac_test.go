package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	draclient "k8s.io/dynamic-resource-allocation/client"

	agentkube "github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/leader"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/kube/scheduler"
)

// serviceAccount returns a REST config that acts as the chart's service
// account ns/name (impersonation by the cluster admin), with the groups
// the API server gives a service account token.
func serviceAccount(cfg *rest.Config, ns, name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	return c
}

// testRBAC runs the scheduler and the agent's API calls as the service
// accounts of the releases "defaults" (agent.installCRD off) and "pools"
// (installCRD, draPublish and dra on) that the value-set subtest created, then reads the audit log: no
// request of theirs was refused, and every permission the chart grants was
// used, or is listed below with the code path that needs it.
func testRBAC(t *testing.T, s *apiServer) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	const ns = "vs-defaults"
	schedSA, agentSA, crdAgentSA := "defaults-tessera-scheduler", "defaults-tessera-agent", "pools-tessera-agent"

	// A node that fits one small pod.
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")}
	if _, err := s.core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rbac-node"},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The node's status is written by kubelet: set it through the subresource.
	n, err := s.core.CoreV1().Nodes().Get(ctx, "rbac-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	if _, err := s.core.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The agent: publish the node's GPUs and read its pods.
	agents := []struct {
		ns, name        string
		installCRD, dra bool
	}{{ns, agentSA, false, false}, {"vs-pools", crdAgentSA, true, true}}
	for ai, sa := range agents {
		cfg := serviceAccount(s.cfg, sa.ns, sa.name)
		core, dyn := kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
		src, err := discovery.Open("sim:2xH100-SXM", catalog.Default())
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := src.Discover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		node := nodes[0]
		node.Name = "rbac-node"
		pubs := agentkube.Publishers{&agentkube.Publisher{Core: core, Dynamic: dyn, SlotsPerGPU: 16, Sharing: gpunode.SharingShared, InstallCRD: sa.installCRD}}
		slicePub := &agentkube.SlicePublisher{Client: core, Sharing: gpunode.SharingShared}
		if sa.dra { // --dra-publish
			pubs = append(pubs, slicePub)
		}
		for i := range 2 { // the second publish updates the GPUNode (and a slice: GPU 0 unhealthy)
			if i == 1 {
				node.GPUs[0].Health = "Unhealthy"
			}
			if err := pubs.Publish(ctx, node); err != nil {
				t.Fatalf("agent %s: publish: %v", sa.name, err)
			}
		}
		if sa.dra {
			waitFor(ctx, t, "the agent's slice with GPU 0 tainted", func() bool {
				l, err := s.core.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
				return err == nil && len(l.Items) == 1 && len(l.Items[0].Spec.Devices) == 2 && len(l.Items[0].Spec.Devices[0].Taints) == 1
			})
			slicePub.Stop()
		}
		// The node's use: created, then patched.
		use := &agentkube.UsePublisher{Core: core, Dynamic: dyn, Node: "rbac-node", InstallCRD: sa.installCRD}
		for range 2 {
			if err := use.Publish(ctx, nodeuse.Status{Source: node.Source, At: time.Now()}); err != nil {
				t.Fatalf("agent %s: publish use: %v", sa.name, err)
			}
		}
		// The next agent creates the GPUNode and GPUUse anew; the last
		// one's GPUNode stays, for the scheduler to allocate a claim on its
		// GPU 1.
		if ai < len(agents)-1 {
			if err := s.dyn.Resource(gpunode.Resource()).Delete(ctx, "rbac-node", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := s.dyn.Resource(nodeuse.Resource()).Delete(ctx, "rbac-node", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pods := agentkube.Pods{Client: core, Node: "rbac-node"}
		if _, err := pods.OnNode(ctx); err != nil {
			t.Fatalf("agent %s: list pods: %v", sa.name, err)
		}
		if _, _, err := pods.Pod(ctx, "default", "none"); err != nil {
			t.Fatalf("agent %s: get pod: %v", sa.name, err)
		}
		if sa.dra { // --dra: the kubeletplugin helper reads each claim kubelet names, with this client
			if _, err := draclient.New(core).ResourceClaims("default").Get(ctx, "none", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("agent %s: get resourceclaim: %v, want not found", sa.name, err)
			}
		}
	}

	// The scheduler, with leader election: binds a pod that fits and
	// reports one that does not.
	cfg := serviceAccount(s.cfg, ns, schedSA)
	client, dyn := kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
	sched, err := scheduler.New(scheduler.Config{Client: client, EventClient: kubernetes.NewForConfigOrDie(cfg), Dynamic: dyn,
		Metrics: prometheus.NewRegistry(), Catalog: catalog.Default(), Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Resync: 200 * time.Millisecond, PodInitialBackoff: 100 * time.Millisecond, PodMaxBackoff: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- sched.RunWithLeaderElection(sctx, leader.Config{Namespace: ns, Name: "tessera-scheduler", Identity: "rbac-test"})
	}()
	// A DRA claim for a share, used by two pods: the first pod's binding
	// allocates it, the second joins it.
	req := resourceapi.ExactDeviceRequest{DeviceClassName: kdra.ClassSharedGPU, Count: 1,
		Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			kdra.CapacityCompute: resource.MustParse("0.5"), kdra.CapacityMemory: resource.MustParse("10Gi")}}}
	if _, err := s.core.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "share"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, cpu, claim string }{{"fits", "1", ""}, {"too-big", "64", ""}, {"claim-a", "100m", "share"}, {"claim-b", "100m", "share"}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "default"}, Spec: corev1.PodSpec{
			SchedulerName: scheduler.DefaultName, Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(p.cpu)}}}}}}
		if p.claim != "" {
			pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &p.claim}}
			pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		}
		if _, err := s.core.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A liveness bound, not a performance one: a refused request shows in
	// the audit log checked below, whatever these waits find.
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	ok := waitFor(wctx, t, "pod fits bound and pod too-big reported unschedulable", func() bool {
		fits, err1 := s.core.CoreV1().Pods("default").Get(ctx, "fits", metav1.GetOptions{})
		big, err2 := s.core.CoreV1().Pods("default").Get(ctx, "too-big", metav1.GetOptions{})
		if err1 != nil || err2 != nil || fits.Spec.NodeName != "rbac-node" {
			return false
		}
		for _, c := range big.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	})
	ok = ok && waitFor(wctx, t, "claim share allocated and held by pods claim-a and claim-b, both bound", func() bool {
		c, err := s.core.ResourceV1().ResourceClaims("default").Get(ctx, "share", metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil || len(c.Status.ReservedFor) != 2 {
			return false
		}
		for _, name := range []string{"claim-a", "claim-b"} {
			if p, err := s.core.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "rbac-node" {
				return false
			}
		}
		return true
	})
	// The cluster view reads the nodes' GPUUse objects (list and watch
	// gpuuses): the last agent's stays.
	ok = ok && waitFor(wctx, t, "the cluster view with rbac-node's GPUUse", func() bool {
		v, ok := sched.View()
		_, has := v.Use["rbac-node"]
		return ok && has
	})
	ok = ok && waitFor(wctx, t, "a FailedScheduling event", func() bool {
		ev, err := s.core.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		return err == nil && len(ev.Items) > 0
	})
	// A renewal updates the Lease (every RetryPeriod, 2s).
	_ = ok && waitFor(wctx, t, "the Lease renewed", func() bool {
		l, err := s.core.CoordinationV1().Leases(ns).Get(ctx, "tessera-scheduler", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "rbac-test" &&
			l.Spec.RenewTime != nil && l.Spec.AcquireTime != nil && l.Spec.RenewTime.After(l.Spec.AcquireTime.Time)
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("scheduler: %v", err)
	}

	used := auditedRequests(t, s)
	for _, sa := range []struct{ ns, name, component string }{{ns, schedSA, "scheduler"}, {ns, agentSA, "agent"}, {"vs-pools", crdAgentSA, "agent"}} {
		user := "system:serviceaccount:" + sa.ns + ":" + sa.name
		for _, r := range used[user] {
			if r.code == 403 {
				t.Errorf("%s was refused %s %s (RBAC too narrow)", sa.name, r.verb, r.resource)
			}
		}
		role, err := s.core.RbacV1().ClusterRoles().Get(ctx, sa.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rules := role.Rules
		if r, err := s.core.RbacV1().Roles(sa.ns).Get(ctx, sa.name, metav1.GetOptions{}); err == nil {
			rules = append(rules, r.Rules...)
		}
		for _, rule := range rules {
			for _, res := range rule.Resources {
				for _, verb := range rule.Verbs {
					key := verb + " " + res
					// Any answer but 403 means the request was authorized
					// (the agent's get of a missing pod is a 404).
					if slices.ContainsFunc(used[user], func(r audited) bool { return r.verb+" "+r.resource == key && r.code != 403 }) {
						continue
					}
					if why := notExercised[sa.component+": "+key]; why != "" {
						continue
					}
					t.Errorf("%s is granted %s but never used it here, and no code path is listed for it (least privilege)", sa.name, key)
				}
			}
		}
	}
}

// notExercised lists permissions the chart grants that this test does
// not drive, with the code path that needs each.
var notExercised = map[string]string{
	"scheduler: get pods":                     "kube/podbind (Settle) reads a pod whose binding failed",
	"scheduler: delete pods":                  "kube/scheduler/preempt.go evicts preemption victims",
	"scheduler: patch events":                 "client-go's event recorder patches the count of a repeated event",
	"agent: create customresourcedefinitions": "kube/crd.Install creates the GPUNode CRD when it is missing (the chart's crds/ made it here)",
	"scheduler: list podgroups":               "kube/crdwatch (for kube/scheduler) starts a PodGroup informer (Tessera's, Volcano's, scheduler-plugins', Kubernetes') at the first pod naming one",
	"scheduler: watch podgroups":              "kube/crdwatch (for kube/scheduler) starts a PodGroup informer (Tessera's, Volcano's, scheduler-plugins', Kubernetes') at the first pod naming one",
	"agent: delete resourceslices":            "the resourceslice helper (agent/kube/draslices.go) deletes a slice the node no longer needs",
	"scheduler: update persistentvolumes": "kube/kubefilter PreBind (VolumeBinding) binds a claim to the volume it chose; " +
		"driven in kube/scheduler TestVolumeConstraints and on the real node (test/e2enode)",
	"scheduler: update persistentvolumeclaims": "kube/kubefilter PreBind (VolumeBinding) names the picked node on a WaitForFirstConsumer claim; " +
		"driven in kube/scheduler TestVolumeConstraints and on the real node (test/e2enode)",
	// Not a request: the API server checks it when a status update
	// changes status.allocation or status.reservedFor (this test's claim
	// pods are refused without it), so the audit log never lists it.
	"scheduler: update resourceclaims/binding": "kube/scheduler/claimalloc.go writeClaims and undoClaims (status.allocation and status.reservedFor)",
}

// audited is one request of the audit log.
type audited struct {
	verb, resource string
	code           int
}

// auditedRequests reads the audit log: each impersonated user's requests
// as verb and resource[/subresource], with the response code.
func auditedRequests(t *testing.T, s *apiServer) map[string][]audited {
	t.Helper()
	f, err := os.Open(s.c.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]audited{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var e struct {
			Stage            string `json:"stage"`
			Verb             string `json:"verb"`
			ImpersonatedUser *struct {
				Username string `json:"username"`
			} `json:"impersonatedUser"`
			RequestURI string `json:"requestURI"`
			ObjectRef  *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ImpersonatedUser == nil || e.ObjectRef == nil || e.ResponseStatus == nil {
			continue
		}
		if e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted" {
			continue
		}
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		u := e.ImpersonatedUser.Username
		out[u] = append(out[u], audited{verb: e.Verb, resource: res, code: e.ResponseStatus.Code})
		// An informer's first list is a watch with sendInitialEvents; it
		// falls back to list calls where the server does not stream, and
		// relists after a watch expires.
		if e.Verb == "watch" && strings.Contains(e.RequestURI, "sendInitialEvents=true") {
			out[u] = append(out[u], audited{verb: "list", resource: res, code: e.ResponseStatus.Code})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls ok until it holds (true) or ctx ends (an error, false).
func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) bool {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Errorf("waiting for %s: %v", what, ctx.Err())
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// testWriter sends logs to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
