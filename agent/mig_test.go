package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl"
	"github.com/tessera-gpu/tessera/migctl/migsim"
)

// migNode is a harness whose H100s are in MIG mode with their layout
// managed by Tessera, behind a simulated NVIDIA driver (migsim) whose
// state outlives agent restarts, as the GPUs do.
type migNode struct {
	*harness
	gpus []*migsim.GPU
	lib  *migsim.Lib
	spec *catalog.MIGSpec
}

func newMIGNode(t *testing.T, n int) *migNode {
	t.Helper()
	h := newHarness(t, fmt.Sprintf("%dxH100-SXM", n))
	m, ok := catalog.Default().Lookup("H100-SXM")
	if !ok || !m.SupportsMIG() {
		t.Fatal("H100-SXM: no MIG geometry")
	}
	mn := &migNode{harness: h, spec: m.MIG, lib: &migsim.Lib{}}
	for i := range h.node.GPUs {
		g := &h.node.GPUs[i]
		g.MIGMode, g.MIGManaged = inventory.MIGEnabled, true
		mn.gpus = append(mn.gpus, migsim.NewGPU(m.MIG, g.UUID, i))
	}
	mn.lib.GPUs = mn.gpus
	return mn
}

// manager is what a (re)started agent builds from NVML for the managed GPUs.
func (m *migNode) manager() *migctl.Manager {
	m.t.Helper()
	specs := map[string]*catalog.MIGSpec{}
	for _, g := range m.gpus {
		specs[g.UUID()] = m.spec
	}
	gpus, err := migctl.Open(m.lib, specs)
	if err != nil {
		m.t.Fatal(err)
	}
	return migctl.NewManager(gpus)
}

// discovered is the node as discovery reads it now: each GPU's instances
// with their starts.
func (m *migNode) discovered() inventory.Node {
	m.t.Helper()
	n := m.node
	n.GPUs = slices.Clone(n.GPUs)
	for i, g := range m.gpus {
		list, err := migctl.List(g, m.spec)
		if err != nil {
			m.t.Fatal(err)
		}
		n.GPUs[i].MIGInstances = nil
		for _, in := range list {
			p := m.spec.Profiles[m.spec.ProfileIndex(in.Profile)]
			n.GPUs[i].MIGInstances = append(n.GPUs[i].MIGInstances, inventory.MIGInstance{UUID: in.UUID, Profile: in.Profile, MemoryMiB: p.MemoryMiB, Start: inventory.Slot(in.Start)})
		}
	}
	return n
}

// createShare asks for a new instance of profile at start on GPU i.
func (m *migNode) createShare(i int, profile string, start int) binding.Share {
	p := m.spec.Profiles[m.spec.ProfileIndex(profile)]
	milli := int64(p.ComputeSlices) * 1000 / int64(m.spec.ComputeSlices)
	uuid := m.node.GPUs[i].UUID
	return binding.Share{UUID: uuid, Index: i, ComputeMilli: milli, ComputeLimitMilli: milli, MemoryMiB: p.MemoryMiB, MemoryLimitMiB: p.MemoryMiB,
		MIGProfile: profile, MIG: &binding.MIGInstance{GPU: uuid, Start: start, Create: true}}
}

func (m *migNode) end(ns, name string) {
	m.t.Helper()
	m.kubelet.Remove(ns, name)
	m.api.remove(ns, name)
	if err := m.agent.Reconcile(context.Background()); err != nil {
		m.t.Fatal(err)
	}
}

// An assignment asking the node to create a MIG instance gets it created
// through NVML at the chosen slot before the container does, and the
// container is handed the new instance's UUID, not its parent's. Refusals
// leak nothing and book nothing: a slot another container holds (refused
// before the driver is asked), a driver error between the GPU and the
// compute instance, and a two-GPU container whose second instance is
// refused (the first is destroyed). When the pod ends its instance is
// destroyed.
func TestMIGInstanceCreatedAtAllocate(t *testing.T) {
	m := newMIGNode(t, 2)
	cfg := m.config()
	mgr := m.manager()
	cfg.MIG = mgr
	m.startAgent(cfg)
	ctx := context.Background()
	got, err := m.kubelet.Admit(ctx, m.bind("ns", "mig", oneGPU, map[string][]binding.Share{"main": {m.createShare(0, "1g.10gb", 3)}}), kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	if l := m.gpus[0].Layout(); l != "1g.10gb@3" {
		t.Fatalf("layout %q, want 1g.10gb@3", l)
	}
	inst := mgr.Holds(mgr.Workloads()[0])
	if len(inst) != 1 || !strings.HasPrefix(inst[0].UUID, "MIG-") {
		t.Fatalf("held %+v", inst)
	}
	if env := got["main"].Envs; env["CUDA_VISIBLE_DEVICES"] != inst[0].UUID || env["NVIDIA_VISIBLE_DEVICES"] != inst[0].UUID {
		t.Errorf("container devices %q / %q, want the created instance %s", env["CUDA_VISIBLE_DEVICES"], env["NVIDIA_VISIBLE_DEVICES"], inst[0].UUID)
	}
	if e := m.agent.Allocations(); len(e) != 1 || e[0].GPUs[0].UUID != inst[0].UUID || !e[0].GPUs[0].MIG.Create {
		t.Errorf("checkpoint %+v, want the instance's UUID with its creation recorded", e)
	}

	refusals := []struct {
		name   string
		shares []binding.Share
		setup  func()
		want   string
	}{
		{"slot held", []binding.Share{m.createShare(0, "2g.20gb", 2)}, func() {}, "overlaps an instance workload"},
		{"driver error mid-way", []binding.Share{m.createShare(0, "1g.10gb", 0)}, func() { m.gpus[0].Fail(migsim.CreateComputeInstance, nvml.ERROR_UNKNOWN) }, "create compute instance of 1g.10gb at slice 0"},
		{"second GPU refused", []binding.Share{m.createShare(0, "3g.40gb", 4), m.createShare(1, "3g.40gb", 4)}, func() {
			m.gpus[0].Fail(migsim.CreateComputeInstance, nvml.SUCCESS)
			m.gpus[1].Fail(migsim.CreateGPUInstance, nvml.ERROR_INSUFFICIENT_RESOURCES)
		}, "gpus[1]: create MIG instance"},
	}
	for _, r := range refusals {
		r.setup()
		calls := len(m.gpus[0].Calls())
		containers := []kubeletsim.Container{{Name: "main", Devices: len(r.shares)}}
		if _, err := m.kubelet.Admit(ctx, m.bind("ns", strings.ReplaceAll(r.name, " ", "-"), containers, map[string][]binding.Share{"main": r.shares}), kubeletsim.AdmitOptions{}); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: admit: %v, want %q", r.name, err, r.want)
		}
		if l0, l1 := m.gpus[0].Layout(), m.gpus[1].Layout(); l0 != "1g.10gb@3" || l1 != "" {
			t.Errorf("%s: layouts %q, %q after the refusal, want only the first pod's instance", r.name, l0, l1)
		}
		if w := mgr.Workloads(); len(w) != 1 || len(m.agent.Allocations()) != 1 {
			t.Errorf("%s: booked %v, recorded %d allocations; want the first pod's only", r.name, w, len(m.agent.Allocations()))
		}
		if r.name == "slot held" && len(m.gpus[0].Calls()) != calls {
			t.Errorf("slot held: the driver was asked: %v", m.gpus[0].Calls()[calls:])
		}
	}
	m.end("ns", "mig")
	if l := m.gpus[0].Layout(); l != "" || len(mgr.Workloads()) != 0 {
		t.Errorf("after the pod ended: layout %q, booked %v", l, mgr.Workloads())
	}
}

// An agent that manages no MIG GPU refuses an assignment asking it to
// create an instance, naming it; one naming a parent GPU the node does not
// have is refused too.
func TestMIGCreateWithoutManagedGPUs(t *testing.T) {
	h := newHarness(t, "1xH100-SXM")
	h.startAgent(h.config())
	parent, _ := h.node.GPUByIndex(0)
	share := binding.Share{UUID: parent.UUID, Index: 0, ComputeMilli: 142, ComputeLimitMilli: 142, MemoryMiB: 9984, MemoryLimitMiB: 9984,
		MIGProfile: "1g.10gb", MIG: &binding.MIGInstance{GPU: parent.UUID, Start: 3, Create: true}}
	pod := h.bind("ns", "mig", oneGPU, map[string][]binding.Share{"main": {share}})
	if _, err := h.kubelet.Admit(context.Background(), pod, kubeletsim.AdmitOptions{}); err == nil || !strings.Contains(err.Error(), "manages no MIG GPU") {
		t.Errorf("admit: %v, want a refusal saying the agent manages no MIG GPU", err)
	}
	share.UUID, share.MIG.GPU = "GPU-elsewhere", "GPU-elsewhere"
	pod = h.bind("ns", "elsewhere", oneGPU, map[string][]binding.Share{"main": {share}})
	if _, err := h.kubelet.Admit(context.Background(), pod, kubeletsim.AdmitOptions{}); err == nil || !strings.Contains(err.Error(), `gpus[0].mig.gpu "GPU-elsewhere" is not a GPU of node`) {
		t.Errorf("admit on another node's GPU: %v", err)
	}
}

// A restarted agent reconciles the managed GPUs with its checkpoint: the
// instance of a running pod is adopted as it is (same UUID, no driver
// call), the instance of a pod that ended while the agent was down is
// destroyed at the first reconcile, or, while a process still holds it,
// kept until a later reconcile finds it free; the operator's instance on
// the same GPU is never touched. Instances created for pods are not
// device plugin units (without a publisher the inventory is never
// refreshed from the driver; TestMIGRestartPublishesAdopted covers what
// is published).
func TestMIGAgentRestartReconciles(t *testing.T) {
	m := newMIGNode(t, 1)
	ctx := context.Background()
	runs := m.restartScene(ctx)
	calls := len(m.gpus[0].Calls())
	uuidOf := m.uuidOf

	m.node = m.discovered()
	cfg := m.config()
	mgr := m.manager()
	cfg.MIG = mgr
	m.startAgent(cfg)
	if c := m.gpus[0].Calls()[calls:]; len(c) != 0 {
		t.Errorf("driver calls at restart %v, want none (both instances adopted)", c)
	}
	if uuidOf("runs") != runs || len(mgr.Holds(mgr.Workloads()[0])) != 1 {
		t.Errorf("running pod's instance %s, want %s adopted", uuidOf("runs"), runs)
	}
	published := m.agent.Inventory().GPUs[0].MIGInstances
	if len(published) != 1 || published[0].Profile != "1g.10gb" {
		t.Errorf("published instances %+v, want only the operator's 1g.10gb (created ones are booked through assignments)", published)
	}
	if err := m.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if l := m.gpus[0].Layout(); l != "3g.40gb@0 2g.20gb@4 1g.10gb@6" {
		t.Errorf("layout %q while the ended pod's instance is busy", l)
	}
	m.gpus[0].SetBusy(4, false)
	if err := m.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if l := m.gpus[0].Layout(); l != "3g.40gb@0 1g.10gb@6" {
		t.Errorf("layout %q, want the ended pod's instance destroyed, the others kept", l)
	}
	m.end("ns", "runs")
	if l := m.gpus[0].Layout(); l != "1g.10gb@6" || len(mgr.Workloads()) != 0 {
		t.Errorf("after every pod ended: layout %q, booked %v; want the operator's instance only", l, mgr.Workloads())
	}
}

// An instance created right before the agent died, for a container never
// recorded in the checkpoint, is in the MIG journal: the next agent
// destroys it.
func TestMIGAgentCrashMidAllocateLeaksNothing(t *testing.T) {
	m := newMIGNode(t, 1)
	cfg := m.config()
	dead := m.deadManager(cfg)
	if _, err := dead.Acquire("never-recorded", migctl.Want{GPU: m.gpus[0].UUID(), Profile: "4g.40gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	cfg.MIG = m.manager()
	m.startAgent(cfg)
	if l := m.gpus[0].Layout(); l != "" {
		t.Errorf("layout %q after restart, want the unrecorded instance destroyed", l)
	}
}

// deadManager is the MIG manager of an agent that ran on cfg's state
// folder before (its journal there), to act out what it did before dying.
func (m *migNode) deadManager(cfg agent.Config) *migctl.Manager {
	m.t.Helper()
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		m.t.Fatal(err)
	}
	dead := m.manager()
	if _, err := dead.Journal(filepath.Join(cfg.StateDir, agent.MIGJournalFile)); err != nil {
		m.t.Fatal(err)
	}
	return dead
}

// An instance a DRA claim holds (recorded in the DRA plugin's journal,
// which the agent is given as MIGWanted) is no container's, yet the next
// agent adopts it instead of destroying it as ended; one nobody wants
// beside it is destroyed.
func TestMIGAgentRestartKeepsClaimsInstances(t *testing.T) {
	m := newMIGNode(t, 1)
	cfg := m.config()
	dead := m.deadManager(cfg)
	claim := migctl.Want{GPU: m.gpus[0].UUID(), Profile: "3g.40gb", Start: 4}
	made, err := dead.Acquire("dra-claim", claim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Acquire("never-recorded", migctl.Want{GPU: m.gpus[0].UUID(), Profile: "3g.40gb", Start: 0}); err != nil {
		t.Fatal(err)
	}
	mgr := m.manager()
	cfg.MIG, cfg.MIGWanted = mgr, map[string][]migctl.Want{"dra-claim": {claim}}
	m.startAgent(cfg)
	if l := m.gpus[0].Layout(); l != "3g.40gb@4" {
		t.Errorf("layout %q after restart, want the claim's 3g.40gb@4 only", l)
	}
	if held := mgr.Holds("dra-claim"); len(held) != 1 || held[0].UUID != made.UUID {
		t.Errorf("the new manager holds %+v for the claim, want its instance %s adopted", held, made.UUID)
	}
}

// With its own CDI spec, the agent adds the device of an instance created
// for a container (its parent's node and the /dev/nvidia-caps nodes of
// its GPU and compute instance, from the driver's mig-minors list) before
// handing the container its CDI name, and drops it once destroyed.
func TestMIGCreatedInstanceGetsCDIDevice(t *testing.T) {
	m := newMIGNode(t, 2)
	root := t.TempDir()
	for p, data := range map[string]string{"dev/nvidiactl": "", cdi.MIGMinorsFile[1:]: m.lib.MIGMinors()} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := m.config()
	specDir := filepath.Join(m.dir, "cdi")
	cfg.Paths.CDISpecDir, cfg.NVML, cfg.HostRoot = specDir, m.lib, root
	mgr := m.manager()
	cfg.MIG = mgr
	m.startAgent(cfg)
	minors, err := cdi.ParseMIGMinors(strings.NewReader(m.lib.MIGMinors()))
	if err != nil {
		t.Fatal(err)
	}
	readSpec := func() map[string][]string {
		data, err := os.ReadFile(filepath.Join(specDir, cdi.FileName))
		if err != nil {
			t.Fatal(err)
		}
		var s cdi.Spec
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, d := range s.Devices {
			for _, n := range d.ContainerEdits.DeviceNodes {
				out[cdi.QualifiedName(d.Name)] = append(out[cdi.QualifiedName(d.Name)], n.Path)
			}
		}
		return out
	}
	if s := readSpec(); len(s) != 2 {
		t.Fatalf("spec at start %v, want the two GPUs", s)
	}
	got, err := m.kubelet.Admit(context.Background(), m.bind("ns", "mig", oneGPU, map[string][]binding.Share{"main": {m.createShare(1, "2g.20gb", 2)}}), kubeletsim.AdmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inst := mgr.Holds(mgr.Workloads()[0])[0]
	name := cdi.QualifiedName(inst.UUID)
	if !slices.Equal(got["main"].CDI, []string{name}) {
		t.Fatalf("container CDI devices %v, want %s", got["main"].CDI, name)
	}
	want := []string{"/dev/nvidia1",
		fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", minors[fmt.Sprintf("gpu1/gi%d/access", inst.GPUInstanceID)]),
		fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", minors[fmt.Sprintf("gpu1/gi%d/ci%d/access", inst.GPUInstanceID, inst.ComputeInstanceID)])}
	if s := readSpec(); !slices.Equal(s[name], want) || len(s) != 3 {
		t.Errorf("spec %v, want %s with %v beside the GPUs", s, name, want)
	}
	m.end("ns", "mig")
	if s := readSpec(); len(s) != 2 || s[name] != nil {
		t.Errorf("spec after the instance was destroyed %v, want the GPUs only", s)
	}
}

// restartScene sets up what the restart tests start from: the operator's
// 1g.10gb instance at slice 6 on GPU 0, and an agent that creates a
// 3g.40gb at 0 for pod "runs" and a 2g.20gb at 4 for pod "ends"; then the
// agent stops, and "ends" ends while it is down with a process still
// holding its instance. It returns the UUID "runs" was given.
func (m *migNode) restartScene(ctx context.Context) string {
	m.t.Helper()
	if _, err := migctl.Create(m.gpus[0], m.spec, "1g.10gb", 6); err != nil { // the operator's
		m.t.Fatal(err)
	}
	m.node = m.discovered()
	cfg := m.config()
	cfg.MIG = m.manager()
	m.startAgent(cfg)
	for _, p := range []struct {
		name, profile string
		start         int
	}{{"runs", "3g.40gb", 0}, {"ends", "2g.20gb", 4}} {
		if _, err := m.kubelet.Admit(ctx, m.bind("ns", p.name, oneGPU, map[string][]binding.Share{"main": {m.createShare(0, p.profile, p.start)}}), kubeletsim.AdmitOptions{}); err != nil {
			m.t.Fatalf("admit %s: %v", p.name, err)
		}
	}
	runs := m.uuidOf("runs")
	m.stopAgent() // "ends" ends while the agent is down; a process lingers
	m.kubelet.Remove("ns", "ends")
	m.api.remove("ns", "ends")
	m.gpus[0].SetBusy(4, true)
	return runs
}

// uuidOf is the UUID the agent's recorded allocation gave pod's first GPU.
func (m *migNode) uuidOf(pod string) string {
	for _, e := range m.agent.Allocations() {
		if e.Pod == pod {
			return e.GPUs[0].UUID
		}
	}
	return ""
}
