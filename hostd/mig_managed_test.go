package hostd

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl"
	"github.com/tessera-gpu/tessera/migctl/migsim"
)

// managedHost is a host with one H100 in MIG mode whose layout the daemon
// manages through a driver (migsim, behind go-nvml's interfaces) whose
// state outlives daemon restarts, as the GPU does.
type managedHost struct {
	t     *testing.T
	gpu   *migsim.GPU
	spec  *catalog.MIGSpec
	nodes []inventory.Node
}

func newManagedHost(t *testing.T) *managedHost {
	t.Helper()
	nodes, err := simulated.Parse([]byte(`nodes: [{name: h, gpus: 1xH100-SXM, overrides: [{index: 0, migManaged: true}]}]`), catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := catalog.Default().Lookup("H100-SXM")
	return &managedHost{t: t, gpu: migsim.NewGPU(m.MIG, nodes[0].GPUs[0].UUID, 0), spec: m.MIG, nodes: nodes}
}

// discovered is the inventory as discovery reads it now (every instance
// on the GPU, with its start).
func (h *managedHost) discovered() []inventory.Node {
	h.t.Helper()
	list, err := migctl.List(h.gpu, h.spec)
	if err != nil {
		h.t.Fatal(err)
	}
	nodes := []inventory.Node{h.nodes[0]}
	nodes[0].GPUs = append([]inventory.GPU(nil), h.nodes[0].GPUs...)
	g := &nodes[0].GPUs[0]
	g.MIGInstances = nil
	for _, in := range list {
		p := h.spec.Profiles[h.spec.ProfileIndex(in.Profile)]
		g.MIGInstances = append(g.MIGInstances, inventory.MIGInstance{UUID: in.UUID, Profile: in.Profile, MemoryMiB: p.MemoryMiB, Start: inventory.Slot(in.Start)})
	}
	return nodes
}

// start runs a daemon on state with a fresh manager of the GPU, as
// tessera up --mig-managed builds one.
func (h *managedHost) start(state string) (*testDaemon, *migctl.Manager) {
	h.t.Helper()
	gpus, err := migctl.Open(&migsim.Lib{GPUs: []*migsim.GPU{h.gpu}}, map[string]*catalog.MIGSpec{h.gpu.UUID(): h.spec})
	if err != nil {
		h.t.Fatal(err)
	}
	mgr := migctl.NewManager(gpus)
	nodes := h.discovered()
	return startDaemon(h.t, state, "1xL4", func(c *Config) { c.Nodes, c.MIG, c.Simulated = nodes, mgr, false }), mgr
}

func migJob(gates, profile string) api.SubmitRequest {
	r := gatedJob(gates, map[string]string{"mig-profile": profile}, 0)
	r.Command[2] = envScript
	return r
}

// On a managed GPU a --mig job's instance is created through the driver
// at the start the engine chose before the job starts (its environment
// names it) and destroyed when the job ends. A creation refused mid-way
// (the driver fails between the GPU and the compute instance) fails that
// job with the driver's reason and leaves nothing behind or booked: the
// next job gets the slot.
func TestMIGManagedJobCreatesAndDestroys(t *testing.T) {
	h := newManagedHost(t)
	d, mgr := h.start(t.TempDir())
	gates := t.TempDir()
	a := submit(t, d, migJob(gates, "3g.40gb")).ID
	eventually(t, "3g.40gb runs", func() bool { return started(t, d, a) })
	s := job(t, d, a).Shares[0]
	held := mgr.Holds(migWorkload(a, 1))
	if len(held) != 1 || s.UUID != held[0].UUID || !strings.HasPrefix(s.UUID, "MIG-") || s.MIG == nil || !s.MIG.Create {
		t.Fatalf("share %+v (mig %+v), held %+v: want the created instance", s, s.MIG, held)
	}
	if l := h.gpu.Layout(); l != "3g.40gb@"+strconv.Itoa(s.MIG.Start) {
		t.Fatalf("layout %q, want the 3g.40gb at the engine's start %d", l, s.MIG.Start)
	}
	out, _ := os.ReadFile(filepath.Join(d.JobDir(a), "stdout.log"))
	if want := s.UUID + " 3g.40gb " + h.gpu.UUID() + "\n"; string(out) != want {
		t.Errorf("job environment %q, want %q", out, want)
	}

	h.gpu.Fail(migsim.CreateComputeInstance, nvml.ERROR_UNKNOWN)
	b := submit(t, d, migJob(gates, "2g.20gb")).ID
	jb, err := d.Wait(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if jb.State != api.Failed || !strings.Contains(jb.Reason, "create compute instance of 2g.20gb") {
		t.Fatalf("job with creation refused: %s %q", jb.State, jb.Reason)
	}
	if l := h.gpu.Layout(); l != "3g.40gb@"+strconv.Itoa(s.MIG.Start) || len(mgr.Workloads()) != 1 {
		t.Fatalf("after the refusal: layout %q, booked %v", l, mgr.Workloads())
	}
	if m := migGPU(t, d, 0); len(m.Instances) != 1 {
		t.Fatalf("engine snapshot after the refusal %+v, want the 3g.40gb only", m.Instances)
	}
	h.gpu.Fail(migsim.CreateComputeInstance, nvml.SUCCESS)
	c := submit(t, d, migJob(gates, "2g.20gb")).ID
	eventually(t, "2g.20gb runs", func() bool { return started(t, d, c) })

	drain(t, d, gates)
	if l := h.gpu.Layout(); l != "" || len(mgr.Workloads()) != 0 {
		t.Errorf("after every job ended: layout %q, booked %v", l, mgr.Workloads())
	}
	if m := migGPU(t, d, 0); len(m.Instances) != 0 {
		t.Errorf("engine snapshot after drain %+v", m.Instances)
	}
}

// A daemon restarted on a managed GPU settles it from its own state: the
// instance of a job still running is adopted (same UUID, no driver call)
// and booked again, so no new job takes its slices; the instance of a job
// that ended while the daemon was down is destroyed, and so is one created
// for a job by a daemon that died before recording the job as starting
// (found in the MIG journal); the operator's instance is left alone.
func TestMIGManagedRestartAdopts(t *testing.T) {
	h := newManagedHost(t)
	if _, err := migctl.Create(h.gpu, h.spec, "1g.10gb", 4); err != nil { // the operator's
		t.Fatal(err)
	}
	state := t.TempDir()
	d, _ := h.start(state)
	gates := t.TempDir()
	a := submit(t, d, migJob(gates, "3g.40gb")).ID // at 0: 4-7 holds the operator's
	b := submit(t, d, migJob(gates, "1g.20gb")).ID // at 6
	eventually(t, "both run", func() bool { return started(t, d, a) && started(t, d, b) })
	ua, ub := job(t, d, a).Shares[0], job(t, d, b).Shares[0]
	jb := job(t, d, b)
	d.shutdown()
	openGate(t, gates, b, 0) // b ends while no daemon runs
	eventually(t, "b's supervisor exits", func() bool {
		alive, err := supervisor.Alive(jb.SupervisorPID, jb.SupervisorStart)
		return err == nil && !alive
	})
	// A daemon that took over, created an instance for a job and died at
	// once.
	dead := migctl.NewManager([]migctl.GPU{{UUID: h.gpu.UUID(), Device: h.gpu, Spec: h.spec}})
	prev, err := dead.Journal(filepath.Join(state, MIGJournalFile))
	if err != nil || len(prev) != 2 || ua.MIG == nil || !ua.MIG.Create || !ub.MIG.Create {
		t.Fatalf("journal %v, %v; want a's and b's instances", prev, err)
	}
	if _, err := dead.Reconcile(prev, nil); err != nil {
		t.Fatal(err)
	}
	ghost := -1
	for st := 0; st < 7 && ghost < 0; st++ { // the first free 1g.10gb slot
		if _, err := dead.Acquire("never-started", migctl.Want{GPU: h.gpu.UUID(), Profile: "1g.10gb", Start: st}); err == nil {
			ghost = st
		}
	}
	if ghost < 0 || ghost == ub.MIG.Start {
		t.Fatalf("no free slot for an instance beside %s", h.gpu.Layout())
	}
	calls := len(h.gpu.Calls())

	d2, mgr := h.start(state)
	if got := job(t, d2, a).Shares[0].UUID; got != ua.UUID {
		t.Errorf("adopted job's instance %s, want %s", got, ua.UUID)
	}
	if l := h.gpu.Layout(); l != "3g.40gb@0 1g.10gb@4" {
		t.Errorf("layout after restart %q, want the running job's and the operator's instances", l)
	}
	for _, c := range h.gpu.Calls()[calls:] {
		if strings.HasPrefix(c, "createGI") {
			t.Errorf("driver asked to create at restart: %s", c)
		}
	}
	if w := mgr.Workloads(); len(w) != 1 || w[0] != migWorkload(a, 1) {
		t.Errorf("booked after restart %v, want %s", w, a)
	}
	if got, _ := migStatus(t, d2, 0); got != "3g.40gb@0*"+a+" 1g.10gb@4" {
		t.Errorf("status after restart %q, want the adopted instance in use by %s and the operator's free", got, a)
	}
	m := migGPU(t, d2, 0)
	inUse := 0
	for _, in := range m.Instances {
		if in.InUse {
			inUse++
		}
	}
	if len(m.Instances) != 2 || inUse != 1 {
		t.Errorf("engine snapshot %+v, want the adopted instance in use and the operator's free", m.Instances)
	}
	if st, _ := d2.Wait(context.Background(), b); st.State != api.Succeeded {
		t.Errorf("b: %s", st.State)
	}
	c := submit(t, d2, migJob(gates, "3g.40gb")).ID
	d2.schedule()
	if st := states(t, d2)[c]; st != api.Queued {
		t.Fatalf("a second 3g.40gb beside the adopted one and the operator's: %s, want queued", st)
	}
	openGate(t, gates, a, 0)
	eventually(t, "the second 3g.40gb runs once the first's instance is destroyed", func() bool { return started(t, d2, c) })
	drain(t, d2, gates)
	if l := h.gpu.Layout(); l != "1g.10gb@4" {
		t.Errorf("layout after every job ended %q, want the operator's instance only", l)
	}
}

// A managed MIG job whose supervisor is killed (SIGKILL, a real process)
// ends as lost once its processes are gone; while its instance is still
// in use by something else it is neither destroyed nor handed out (its
// slices stay booked, so a new job waits), and once free it is destroyed
// and the waiting job runs.
func TestMIGManagedJobKilled(t *testing.T) {
	h := newManagedHost(t)
	d, mgr := h.start(t.TempDir())
	gates := t.TempDir()
	a := submit(t, d, migJob(gates, "7g.80gb")).ID
	eventually(t, "7g.80gb runs", func() bool { return started(t, d, a) })
	ja := job(t, d, a)
	if !h.gpu.SetBusy(ja.Shares[0].MIG.Start, true) {
		t.Fatalf("no instance at %d: %s", ja.Shares[0].MIG.Start, h.gpu.Layout())
	}
	if err := syscall.Kill(ja.SupervisorPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if fin, err := d.Wait(context.Background(), a); err != nil || fin.State != api.Lost {
		t.Fatalf("killed job: %+v, %v; want lost", fin.State, err)
	}
	b := submit(t, d, migJob(gates, "1g.10gb")).ID
	d.schedule()
	if st := states(t, d)[b]; st != api.Queued {
		t.Fatalf("1g.10gb while the killed job's instance is in use: %s, want queued", st)
	}
	if l, w := h.gpu.Layout(), mgr.Workloads(); l != "7g.80gb@0" || len(w) != 1 || w[0] != migWorkload(a, 1) {
		t.Fatalf("layout %q, booked %v while in use; want the 7g.80gb kept for %s", l, w, a)
	}
	h.gpu.SetBusy(0, false)
	eventually(t, "1g.10gb runs once the instance is destroyed", func() bool { return started(t, d, b) })
	if l := h.gpu.Layout(); strings.Contains(l, "7g") || !strings.Contains(l, "1g.10gb@") {
		t.Errorf("layout %q, want the 1g.10gb only", l)
	}
	drain(t, d, gates)
}

// A restartable MIG job preempted while something still uses its instance
// is queued again, but its slices stay booked until the instance is
// destroyed: the preempting job waits rather than being placed on slices
// still taken. Once free, the preempting job runs on a new instance, and
// the preempted job's next run gets its own instance (never the old run's
// booking, which is released once and only once).
func TestMIGManagedPreemptedWhileInUse(t *testing.T) {
	h := newManagedHost(t)
	d, mgr := h.start(t.TempDir())
	gates := t.TempDir()
	low := submit(t, d, restartable(migJob(gates, "7g.80gb"))).ID
	eventually(t, "low-priority 7g.80gb runs", func() bool { return started(t, d, low) })
	h.gpu.SetBusy(0, true)
	high := submit(t, d, gatedJob(gates, map[string]string{"mig-profile": "7g.80gb"}, 10)).ID
	eventually(t, "the low-priority job is queued again", func() bool { return states(t, d)[low] == api.Queued })
	d.schedule()
	if s := states(t, d); s[high] != api.Queued {
		t.Fatalf("preempting job while the victim's instance is in use: %s, want queued", s[high])
	}
	if w := mgr.Workloads(); len(w) != 1 || w[0] != migWorkload(low, 1) || h.gpu.Layout() != "7g.80gb@0" {
		t.Fatalf("booked %v, layout %q; want the victim's first run's instance kept", w, h.gpu.Layout())
	}
	h.gpu.SetBusy(0, false)
	eventually(t, "the preempting job runs", func() bool { return started(t, d, high) })
	if w := mgr.Workloads(); len(w) != 1 || w[0] != migWorkload(high, 1) {
		t.Errorf("booked %v, want the preempting job's instance only", w)
	}
	openGate(t, gates, high, 0)
	eventually(t, "the preempted job's second run", func() bool { return started(t, d, low) })
	if w := mgr.Workloads(); len(w) != 1 || w[0] != migWorkload(low, 2) {
		t.Errorf("booked %v, want the second run's instance", w)
	}
	drain(t, d, gates)
	if l := h.gpu.Layout(); l != "" {
		t.Errorf("layout after drain %q", l)
	}
}
