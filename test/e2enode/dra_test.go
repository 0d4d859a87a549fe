package e2enode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	agentdra "github.com/tessera-gpu/tessera/agent/dra"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

const (
	// hostCDIDir is the chart's CDI folder on the host (the agent's
	// --cdi-spec-dir, mounted at the same path), one containerd reads.
	hostCDIDir = "/var/run/cdi"
	// draJournal is the plugin's journal of prepared claims: the chart's
	// state folder /var/lib/tessera, the agent's --state-dir agent/.
	draJournal = "/var/lib/tessera/agent/" + agentdra.JournalFile
)

// TestRealNodeDRA is issue 21's acceptance test on a real node: Tessera
// from its image and the chart (agent.dra on), kube-scheduler and
// Tessera's scheduler allocating ResourceClaims on the devices the agent
// publishes with the structured allocator, and the real kubelet and containerd preparing them through
// Tessera's kubelet plugin and its CDI specs. Steps build on each other:
// a failed one ends the test.
func TestRealNodeDRA(t *testing.T) {
	claimCDIDir(t)
	n := startNode(t, "1xH200", "agent.dra=true")
	gpu := n.gpuUUIDs()
	if len(gpu) != 1 {
		t.Fatalf("GPUNode lists %d GPUs, want 1 (sim:1xH200)", len(gpu))
	}
	r := &draRun{uuid: gpu[0], uids: map[string]types.UID{}}
	// Runs before the node's own cleanup: the state is dumped while the
	// node lives, and the pods go while the agent can still unprepare
	// their claims.
	t.Cleanup(func() {
		if t.Failed() {
			n.dumpDRA()
		}
		n.deleteAllPods()
		for _, uid := range r.uids {
			_ = os.Remove(specPath(uid))
		}
	})
	steps := []struct {
		name string
		run  func(t *testing.T, n *node, r *draRun)
	}{
		{"slices and classes published", slicesPublished},
		{"a claimed share runs", claimedShareRuns},
		{"a second claim shares the GPU", secondClaimShares},
		{"deleting a pod unprepares its claim", deletingUnprepares},
		{"kubelet restart", draKubeletRestart},
		{"agent pod deleted", draAgentPodDeleted},
		{"a bad claim is refused", badClaimRefused},
		{"deleting every pod unprepares every claim", draAllFreed},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, n.with(t), r) }) {
			return
		}
	}
}

// draRun is what the steps share: the node's GPU and the UID of each
// claim the test made, by name.
type draRun struct {
	uuid string
	uids map[string]types.UID
}

// claimCDIDir makes sure the host's CDI folder exists before containerd
// starts (so that it watches it), and removes it after only if the test
// made it.
func claimCDIDir(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(hostCDIDir); err == nil {
		return
	}
	if err := os.MkdirAll(hostCDIDir, 0o755); err != nil {
		t.Fatalf("create %s: %v", hostCDIDir, err)
	}
	t.Cleanup(func() { _ = os.Remove(hostCDIDir) })
}

// specPath is the host path of a prepared claim's CDI spec (docs/dra.md).
func specPath(uid types.UID) string {
	return filepath.Join(hostCDIDir, "gpu.tessera.io-claim_"+string(uid)+".json")
}

// journalUIDs reads the UIDs of the claims the plugin's journal records.
func journalUIDs() (map[types.UID]bool, error) {
	data, err := os.ReadFile(draJournal)
	if errors.Is(err, os.ErrNotExist) {
		return map[types.UID]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	var j struct {
		Claims []struct {
			UID types.UID `json:"uid"`
		} `json:"claims"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", draJournal, err)
	}
	out := map[types.UID]bool{}
	for _, c := range j.Claims {
		out[c.UID] = true
	}
	return out, nil
}

// prepared checks on the host that the claim is prepared (its spec file
// and journal entry exist) or not.
func prepared(uid types.UID, want bool) error {
	_, err := os.Stat(specPath(uid))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if hasSpec := err == nil; hasSpec != want {
		return fmt.Errorf("CDI spec %s exists: %v, want %v", specPath(uid), hasSpec, want)
	}
	j, err := journalUIDs()
	if err != nil {
		return err
	}
	if j[uid] != want {
		return fmt.Errorf("journal %s records claim %s: %v, want %v (records %v)", draJournal, uid, j[uid], want, j)
	}
	return nil
}

func slicesPublished(t *testing.T, n *node, r *draRun) {
	n.eventually(2*time.Minute, "the node's ResourceSlices list its GPU", func() error {
		l, err := n.cs.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, s := range l.Items {
			seen = append(seen, s.Name+" (driver "+s.Spec.Driver+", pool "+s.Spec.Pool.Name+")")
			if s.Spec.Driver != kdra.DriverName || s.Spec.Pool.Name != n.rn.Name || s.Spec.NodeName == nil || *s.Spec.NodeName != n.rn.Name {
				continue
			}
			for _, d := range s.Spec.Devices {
				if a := d.Attributes["uuid"]; a.StringValue != nil && *a.StringValue == r.uuid {
					if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
						return fmt.Errorf("device %s of slice %s: allowMultipleAllocations not set on a shared GPU", d.Name, s.Name)
					}
					return nil
				}
			}
		}
		return fmt.Errorf("no device of driver %s in pool %s with uuid %s; slices: %v", kdra.DriverName, n.rn.Name, r.uuid, seen)
	})
	for _, class := range []string{kdra.ClassGPU, kdra.ClassSharedGPU} {
		if _, err := n.cs.ResourceV1().DeviceClasses().Get(n.ctx, class, metav1.GetOptions{}); err != nil {
			t.Errorf("DeviceClass %s: %v", class, err)
		}
	}
	// kubelet lists a plugin once it registered through its registry.
	reg := filepath.Join(n.kubeletRootDir(), "plugins_registry")
	n.eventually(2*time.Minute, "the plugin's registration socket in "+reg, func() error {
		es, err := os.ReadDir(reg)
		if err != nil {
			return err
		}
		for _, e := range es {
			if strings.HasPrefix(e.Name(), kdra.DriverName) {
				return nil
			}
		}
		return fmt.Errorf("%d entries, none of %s", len(es), kdra.DriverName)
	})
}

// shareClaim is a claim for a share of the shared class: the guarantee as
// capacity (compute and memory named, so that kube-scheduler books both)
// and the burst limits as the opaque ShareConfig, as docs/dra.md shows.
func (n *node) shareClaim(name, compute, memory, computeLimit, memoryLimit string) *resourceapi.ResourceClaim {
	n.t.Helper()
	params, err := json.Marshal(kdra.ShareConfig{APIVersion: kdra.ConfigAPIVersion, Kind: kdra.ConfigKind, ComputeLimit: computeLimit, MemoryLimit: memoryLimit})
	if err != nil {
		n.t.Fatalf("ShareConfig of claim %s: %v", name, err)
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: kdra.ClassSharedGPU,
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					"compute": resource.MustParse(compute), "memory": resource.MustParse(memory)}},
			}}},
			Config: []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: kdra.DriverName, Parameters: runtime.RawExtension{Raw: params}}}}},
		}},
	}
}

// claimPod is a probe pod that scheduler by places, using one claim.
func (n *node) claimPod(name, claim, by string) *corev1.Pod {
	p := n.podSpec(name, nil, nil)
	p.Spec.SchedulerName = by
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return p
}

// createClaimPod creates a claim and its pod (placed by scheduler by), and
// records the claim's UID.
func (n *node) createClaimPod(r *draRun, pod string, claim *resourceapi.ResourceClaim, by string) types.UID {
	n.t.Helper()
	c, err := n.cs.ResourceV1().ResourceClaims("default").Create(n.ctx, claim, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		n.t.Fatalf("create claim %s: %v", claim.Name, err)
	}
	r.uids[c.Name] = c.UID
	n.create(n.claimPod(pod, c.Name, by))
	return c.UID
}

// runsShare creates a 0.5 share with burst 0.8 (memory 20Gi, cap 40Gi)
// and a pod using it that kube-scheduler places (and allocates the claim
// for), and checks what the container got.
func (n *node) runsShare(r *draRun, pod, claim string) {
	n.t.Helper()
	n.runsShareBy(r, pod, claim, corev1.DefaultSchedulerName)
}

// runsShareBy is runsShare with the pod placed by scheduler by.
func (n *node) runsShareBy(r *draRun, pod, claim, by string) {
	n.t.Helper()
	uid := n.createClaimPod(r, pod, n.shareClaim(claim, "0.5", "20Gi", "0.8", "40Gi"), by)
	env := n.running(pod)
	checkClaimHandoff(n.t, pod, env, r.uuid, uid)
	n.checkAllocation(claim, pod)
	if err := prepared(uid, true); err != nil {
		n.t.Errorf("claim %s of running pod %s: %v", claim, pod, err)
	}
}

// checkClaimHandoff checks a probe's variables against a prepared 0.5
// share with burst 0.8, 20Gi guaranteed and 40Gi cap, on the GPU uuid,
// seated under the claim's key, with the interception library preloaded
// from a file that exists in the container (mounted by the claim's CDI
// spec).
func checkClaimHandoff(t *testing.T, name string, env map[string]string, uuid string, claim types.UID) {
	t.Helper()
	want := map[string]string{
		"NVIDIA_VISIBLE_DEVICES":  uuid,
		"CUDA_VISIBLE_DEVICES":    uuid,
		"TESSERA_GPU_UUIDS":       uuid,
		"TESSERA_COMPUTE_REQUEST": "500m",
		"TESSERA_COMPUTE_LIMIT":   "800m",
		"TESSERA_MEMORY_REQUEST":  "20480Mi",
		"TESSERA_MEMORY_LIMIT":    "40960Mi",
		"TESSERA_CONTAINER_ID":    agentdra.Key(claim),
		"LD_PRELOAD":              interceptLib,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("pod %s: %s=%q, want %q (all: %v)", name, k, env[k], v, env)
		}
	}
	if !strings.HasPrefix(env["probe.preload"], "exists ") {
		t.Errorf("pod %s: LD_PRELOAD %s inside the container: %s", name, env["LD_PRELOAD"], env["probe.preload"])
	}
}

// checkAllocation checks that the claim is allocated on the node's pool,
// booking the guarantee, and reserved for the pod.
func (n *node) checkAllocation(claim, pod string) {
	n.t.Helper()
	c, err := n.cs.ResourceV1().ResourceClaims("default").Get(n.ctx, claim, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		n.t.Fatalf("claim %s: allocation %+v, want one device", claim, c.Status.Allocation)
	}
	res := c.Status.Allocation.Devices.Results[0]
	if res.Driver != kdra.DriverName || res.Pool != n.rn.Name {
		n.t.Errorf("claim %s: allocated %s/%s/%s, want driver %s pool %s", claim, res.Driver, res.Pool, res.Device, kdra.DriverName, n.rn.Name)
	}
	compute, memory := res.ConsumedCapacity["compute"], res.ConsumedCapacity["memory"]
	if compute.Cmp(resource.MustParse("0.5")) != 0 || memory.Cmp(resource.MustParse("20Gi")) != 0 {
		n.t.Errorf("claim %s: consumed capacity %v, want compute 0.5, memory 20Gi", claim, res.ConsumedCapacity)
	}
	if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].Name != pod {
		n.t.Errorf("claim %s: reserved for %+v, want pod %s", claim, c.Status.ReservedFor, pod)
	}
}

func claimedShareRuns(t *testing.T, n *node, r *draRun) {
	n.runsShare(r, "dra-a", "share-a")
}

// secondClaimShares: Tessera's scheduler places the second pod and
// allocates its claim, beside the claim kube-scheduler allocated (which it
// books): checkClaimHandoff checks the same GPU UUID, the one GPU takes
// both.
func secondClaimShares(t *testing.T, n *node, r *draRun) {
	n.runsShareBy(r, "dra-b", "share-b", schedulerName)
	n.eventually(time.Minute, "dra-b's Scheduled event from Tessera's scheduler", func() error {
		l, err := n.cs.CoreV1().Events("default").List(n.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=dra-b,reason=Scheduled"})
		if err != nil {
			return err
		}
		for _, e := range l.Items {
			if e.Source.Component == schedulerName || e.ReportingController == schedulerName {
				return nil
			}
		}
		return fmt.Errorf("%d Scheduled events, none from %s", len(l.Items), schedulerName)
	})
}

// unprepared deletes a pod and checks that kubelet had its claim
// unprepared (spec and journal entry gone from the host), that the
// resourceclaim controller released the claim, and deletes the claim.
func (n *node) unprepared(r *draRun, pod, claim string) {
	n.t.Helper()
	uid := r.uids[claim]
	n.deletePod(pod)
	n.eventually(time.Minute, "claim "+claim+" unprepared on the host", func() error { return prepared(uid, false) })
	n.eventually(time.Minute, "claim "+claim+" released", func() error {
		c, err := n.cs.ResourceV1().ResourceClaims("default").Get(n.ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(c.Status.ReservedFor) != 0 || c.Status.Allocation != nil {
			return fmt.Errorf("reserved for %+v, allocated %v", c.Status.ReservedFor, c.Status.Allocation != nil)
		}
		return nil
	})
	n.deleteClaim(claim)
}

func (n *node) deleteClaim(name string) {
	n.t.Helper()
	if err := n.cs.ResourceV1().ResourceClaims("default").Delete(n.ctx, name, metav1.DeleteOptions{}); err != nil {
		n.t.Fatalf("delete claim %s: %v", name, err)
	}
	n.eventually(time.Minute, "claim "+name+" gone", func() error {
		c, err := n.cs.ResourceV1().ResourceClaims("default").Get(n.ctx, name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("still there (finalizers %v)", c.Finalizers)
		}
		return nil
	})
}

func deletingUnprepares(t *testing.T, n *node, r *draRun) {
	n.unprepared(r, "dra-a", "share-a")
	// dra-b's claim is untouched.
	if err := prepared(r.uids["share-b"], true); err != nil {
		t.Errorf("share-b after dra-a left: %v", err)
	}
}

// draKubeletRestart: the running pod keeps its container, a new claim is
// prepared through the plugin registered again, and the claim prepared
// before the restart is unprepared.
func draKubeletRestart(t *testing.T, n *node, r *draRun) {
	ids := n.containerIDs("dra-b")
	if err := n.rn.RestartKubelet(n.ctx, n.c); err != nil {
		t.Fatalf("restart kubelet: %v", err)
	}
	n.runsShare(r, "dra-c", "share-c")
	if got := n.containerIDs("dra-b"); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("dra-b's container changed across the kubelet restart: %v, then %v", ids, got)
	}
	n.unprepared(r, "dra-b", "share-b")
}

// draAgentPodDeleted: the same across a new agent pod, which restores the
// prepared claims from its journal and registers again.
func draAgentPodDeleted(t *testing.T, n *node, r *draRun) {
	ids := n.containerIDs("dra-c")
	old := n.waitPods("tessera-system", componentSelector("agent"), 1, "ready", podReady)[0]
	if err := n.cs.CoreV1().Pods("tessera-system").Delete(n.ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the agent pod: %v", err)
	}
	n.waitPods("tessera-system", componentSelector("agent"), 1, "ready (a new pod)", func(p *corev1.Pod) bool {
		return p.UID != old.UID && podReady(p)
	})
	if err := prepared(r.uids["share-c"], true); err != nil {
		t.Errorf("share-c after the agent's restart: %v", err)
	}
	n.runsShare(r, "dra-d", "share-d")
	if got := n.containerIDs("dra-c"); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("dra-c's container changed across the agent's restart: %v, then %v", ids, got)
	}
	n.unprepared(r, "dra-c", "share-c")
}

// badClaimRefused: a burst below the guarantee is refused by the plugin
// when kubelet prepares it; kubelet reports the plugin's message, naming
// the field, on the pod, and nothing is left on the host.
func badClaimRefused(t *testing.T, n *node, r *draRun) {
	uid := n.createClaimPod(r, "dra-bad", n.shareClaim("share-bad", "0.25", "10Gi", "0.1", ""), corev1.DefaultSchedulerName)
	var msg string
	n.eventually(2*time.Minute, "an event on dra-bad with the plugin's refusal", func() error {
		ev, err := n.cs.CoreV1().Events("default").List(n.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=dra-bad"})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range ev.Items {
			if strings.Contains(e.Message, "computeLimit") {
				msg = e.Reason + ": " + e.Message
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return fmt.Errorf("events: %v", seen)
	})
	t.Logf("dra-bad: %s", msg)
	for _, w := range []string{"spec.devices.config[].opaque.parameters.computeLimit", `"0.1"`, "share-bad"} {
		if !strings.Contains(msg, w) {
			t.Errorf("dra-bad's event lacks %q: %s", w, msg)
		}
	}
	p, err := n.cs.CoreV1().Pods("default").Get(n.ctx, "dra-bad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase == corev1.PodRunning {
		t.Errorf("dra-bad runs with a refused claim: %s", podState(p))
	}
	if err := prepared(uid, false); err != nil {
		t.Errorf("refused claim share-bad: %v", err)
	}
	n.deletePod("dra-bad")
	n.deleteClaim("share-bad")
}

func draAllFreed(t *testing.T, n *node, r *draRun) {
	n.unprepared(r, "dra-d", "share-d")
	j, err := journalUIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(j) != 0 {
		t.Errorf("journal %s still records %v", draJournal, j)
	}
	specs, _ := filepath.Glob(filepath.Join(hostCDIDir, "gpu.tessera.io-claim_*.json"))
	if len(specs) != 0 {
		t.Errorf("claim specs left in %s: %v", hostCDIDir, specs)
	}
}

// dumpDRA logs what a failed DRA step needs beyond dumpState: claims,
// slices, the host's claim specs and journal, the agent's log.
func (n *node) dumpDRA() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l, err := n.cs.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range l.Items {
			st, _ := json.Marshal(c.Status)
			n.t.Logf("claim %s/%s uid %s finalizers %v: %s", c.Namespace, c.Name, c.UID, c.Finalizers, st)
		}
	}
	if l, err := n.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range l.Items {
			n.t.Logf("slice %s: driver %s pool %s (%d devices)", s.Name, s.Spec.Driver, s.Spec.Pool.Name, len(s.Spec.Devices))
		}
	}
	specs, _ := filepath.Glob(filepath.Join(hostCDIDir, "*"))
	n.t.Logf("%s: %v", hostCDIDir, specs)
	if j, err := os.ReadFile(draJournal); err == nil {
		n.t.Logf("%s:\n%s", draJournal, j)
	}
	if l, err := n.cs.CoreV1().Pods("tessera-system").List(ctx, metav1.ListOptions{LabelSelector: componentSelector("agent")}); err == nil {
		for _, p := range l.Items {
			n.t.Logf("agent %s log:\n%s", p.Name, n.logs(ctx, p.Namespace, p.Name, "agent", 80))
		}
	}
	n.t.Logf("kubelet log tail:\n%s", n.rn.KubeletLog(80))
}
