package hostd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery/simulated"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/request"
)

// startMIGDaemon runs a daemon on the simulated nodes file nodesYAML.
func startMIGDaemon(t *testing.T, nodesYAML string) *testDaemon {
	t.Helper()
	nodes, err := simulated.Parse([]byte(nodesYAML), catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, t.TempDir(), "1xL4", func(c *Config) { c.Nodes = nodes })
}

// migGPU is GPU index gi's MIG side in the daemon's live snapshot.
func migGPU(t *testing.T, d *testDaemon, gi int) *placement.MIGGPU {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.engine().Nodes[d.at(0)].GPUs[gi]
	if g.MIG == nil {
		t.Fatalf("GPU %d is not in MIG mode in the snapshot", gi)
	}
	m := *g.MIG
	m.Instances = slices.Clone(m.Instances)
	return &m
}

const envScript = `echo "$CUDA_VISIBLE_DEVICES $TESSERA_MIG_PROFILES $TESSERA_MIG_PARENT_UUIDS"; g="$GATES/$TESSERA_JOB_ID"; while [ ! -s "$g" ]; do [ -d "$GATES" ] || exit 99; sleep 0.02; done; exit "$(cat "$g")"`

// Static MIG on a simulated A100-80GB: GPU 0 in MIG mode with a 3g.40gb
// at 4 and a 1g.10gb at 0 (not managed), GPU 1 not in MIG mode. A MIG job
// takes the configured instance of its profile and nothing else: a
// second 1g.10gb waits (no free instance, and none may be created), and
// runs on the same instance once the first ends. A fractional job never
// lands on the MIG GPU, and a MIG job never on GPU 1.
func TestMIGStaticInstances(t *testing.T) {
	d := startMIGDaemon(t, `nodes: [{name: a, gpus: 2xA100-80GB, overrides: [{index: 0, migInstances: [3g.40gb@4, 1g.10gb@0]}]}]`)
	st, err := d.Status()
	if err != nil {
		t.Fatal(err)
	}
	parent := st.GPUs[0].UUID
	var inst1g, inst3g string
	for _, in := range d.cfg.Nodes[0].GPUs[0].MIGInstances {
		switch in.Profile {
		case "1g.10gb":
			inst1g = in.UUID
		case "3g.40gb":
			inst3g = in.UUID
		}
	}
	gates := t.TempDir()
	mig := func(p string) api.SubmitRequest { return migJob(gates, p) }
	a := submit(t, d, mig("1g.10gb")).ID
	b := submit(t, d, mig("1g.10gb")).ID
	c := submit(t, d, mig("3g.40gb")).ID
	eventually(t, "first 1g.10gb runs", func() bool { return started(t, d, a) })
	d.schedule()
	if s := states(t, d)[b]; s != api.Queued {
		t.Fatalf("second 1g.10gb on a static layout with one 1g.10gb: %s, want queued", s)
	}
	// The queue is strict: the 3g.40gb waits behind the second 1g.10gb.
	frac := submit(t, d, gatedJob(gates, map[string]string{"compute": "0.5"}, 10)).ID
	eventually(t, "fractional job runs", func() bool { return started(t, d, frac) })
	if j := job(t, d, frac); j.Shares[0].Index != 1 {
		t.Errorf("fractional job on GPU %d, want 1 (GPU 0 is in MIG mode)", j.Shares[0].Index)
	}
	j := job(t, d, a)
	if s := j.Shares[0]; s.UUID != inst1g || s.MIG == nil || s.MIG.Create || s.MIG.GPU != parent || s.MIG.Start != 0 || s.Index != 0 {
		t.Fatalf("1g.10gb share: %+v (mig %+v), want instance %s at 0 on %s", s, s.MIG, inst1g, parent)
	}
	out, _ := os.ReadFile(filepath.Join(d.JobDir(a), "stdout.log"))
	if want := inst1g + " 1g.10gb " + parent + "\n"; string(out) != want {
		t.Errorf("env: %q, want %q", out, want)
	}
	if m := migGPU(t, d, 0); len(m.Instances) != 2 || !m.Instances[1].InUse || m.Instances[0].InUse {
		t.Errorf("snapshot instances %+v: want the 1g.10gb in use only", m.Instances)
	}
	openGate(t, gates, a, 0)
	eventually(t, "second 1g.10gb and the 3g.40gb run", func() bool { return started(t, d, b) && started(t, d, c) })
	if s := job(t, d, b).Shares[0]; s.UUID != inst1g {
		t.Errorf("second 1g.10gb on %s, want the freed %s", s.UUID, inst1g)
	}
	if s := job(t, d, c).Shares[0]; s.UUID != inst3g || s.MIG.Start != 4 {
		t.Errorf("3g.40gb share %+v, want %s at 4", s, inst3g)
	}
	drain(t, d, gates)
	if m := migGPU(t, d, 0); len(m.Instances) != 2 || m.Instances[0].InUse || m.Instances[1].InUse {
		t.Errorf("after drain: %+v, want the static layout unchanged and free", m.Instances)
	}
}

// Dynamic MIG on a simulated H100 whose layout Tessera manages: each job
// gets an instance created at the start slot the engine's planner chose
// (the same engine run on the idle host agrees), named after its parent
// and start; no two jobs share an instance or overlapping slices; a
// 7g.80gb waits until the instances are gone, and the snapshot is empty
// again when every job has ended.
func TestMIGDynamicInstances(t *testing.T) {
	d := startMIGDaemon(t, `nodes: [{name: h, gpus: 1xH100-SXM, overrides: [{index: 0, migManaged: true}]}]`)
	parent := d.cfg.Nodes[0].GPUs[0].UUID
	gates := t.TempDir()
	mig := func(p string) api.SubmitRequest { return migJob(gates, p) }
	// The start the engine picks for a first 3g.40gb on the idle GPU.
	idle := d.empty.Clone()
	pol, err := placement.New(d.cfg.Policy, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	probe := placement.Pod{Name: "p", GPU: parseFields(t, d, map[string]string{"mig-profile": "3g.40gb"})}
	if obs, ok := pol.(placement.Observer); ok {
		obs.Observe(&probe) // the daemon learns of the job when it is submitted
	}
	want, err := pol.Place(idle, &probe)
	if err != nil || len(want.MIG) != 1 || !want.MIG[0].Create {
		t.Fatalf("engine on the idle GPU: %+v, %v", want, err)
	}
	a := submit(t, d, mig("3g.40gb")).ID
	eventually(t, "3g.40gb runs", func() bool { return started(t, d, a) })
	s := job(t, d, a).Shares[0]
	if s.MIG == nil || !s.MIG.Create || s.MIG.Start != want.MIG[0].Start || s.MIG.GPU != parent || s.UUID != simulatedMIGUUID(parent, s.MIG.Start) {
		t.Fatalf("3g.40gb share %+v (mig %+v): want created at the planner's start %d", s, s.MIG, want.MIG[0].Start)
	}
	b := submit(t, d, mig("2g.20gb")).ID
	c := submit(t, d, mig("1g.10gb")).ID
	eventually(t, "2g.20gb and 1g.10gb run", func() bool { return started(t, d, b) && started(t, d, c) })
	seen := map[int]string{}
	for _, id := range []string{a, b, c} {
		s := job(t, d, id).Shares[0]
		if other, dup := seen[s.MIG.Start]; dup {
			t.Fatalf("%s and %s both start at slice %d", id, other, s.MIG.Start)
		}
		seen[s.MIG.Start] = id
		out, _ := os.ReadFile(filepath.Join(d.JobDir(id), "stdout.log"))
		if !strings.HasPrefix(string(out), s.UUID+" "+s.MIGProfile+" "+parent) {
			t.Errorf("%s env %q, want its instance %s", id, out, s.UUID)
		}
	}
	if m := migGPU(t, d, 0); len(m.Instances) != 3 {
		t.Fatalf("snapshot instances %+v, want 3", m.Instances)
	}
	if _, ok := migGPU(t, d, 0).FreeSlots(); !ok {
		t.Fatal("layout unknown")
	}
	whole := submit(t, d, mig("7g.80gb")).ID
	d.schedule()
	if st := states(t, d)[whole]; st != api.Queued {
		t.Fatalf("7g.80gb beside three instances: %s, want queued", st)
	}
	for _, id := range []string{a, b, c} {
		openGate(t, gates, id, 0)
	}
	eventually(t, "7g.80gb runs once the instances are destroyed", func() bool { return started(t, d, whole) })
	if s := job(t, d, whole).Shares[0]; s.MIG.Start != 0 || !s.MIG.Create {
		t.Errorf("7g.80gb share %+v", s.MIG)
	}
	drain(t, d, gates)
	if m := migGPU(t, d, 0); len(m.Instances) != 0 {
		t.Errorf("after drain the snapshot still has %+v", m.Instances)
	}
	if j, _ := d.Wait(context.Background(), whole); j.State != api.Succeeded {
		t.Errorf("7g.80gb: %s", j.State)
	}
}

// On a managed GPU that also has a configured instance, an instance the
// daemon creates is named apart from the configured ones: the configured
// 3g.40gb at slice 4 is the GPU's first (ordinal 0) and a 4g.40gb can only
// be created at slice 0, yet the two jobs see two different UUIDs.
func TestMIGCreatedAndConfiguredUUIDsDiffer(t *testing.T) {
	d := startMIGDaemon(t, `nodes: [{name: a, gpus: 1xA100-80GB, overrides: [{index: 0, migManaged: true, migInstances: [3g.40gb@4]}]}]`)
	g := d.cfg.Nodes[0].GPUs[0]
	if len(g.MIGInstances) != 1 {
		t.Fatalf("configured instances %+v, want the 3g.40gb alone", g.MIGInstances)
	}
	configured := g.MIGInstances[0].UUID
	gates := t.TempDir()
	mig := func(p string) api.SubmitRequest { return migJob(gates, p) }
	taken := submit(t, d, mig("3g.40gb")).ID
	created := submit(t, d, mig("4g.40gb")).ID
	eventually(t, "both jobs run", func() bool { return started(t, d, taken) && started(t, d, created) })
	st, ct := job(t, d, taken).Shares[0], job(t, d, created).Shares[0]
	if st.UUID != configured || st.MIG == nil || st.MIG.Create || st.MIG.Start != 4 {
		t.Fatalf("3g.40gb share %+v (mig %+v), want the configured %s at 4", st, st.MIG, configured)
	}
	if ct.MIG == nil || !ct.MIG.Create || ct.MIG.Start != 0 {
		t.Fatalf("4g.40gb share %+v (mig %+v), want created at 0", ct, ct.MIG)
	}
	if ct.UUID == st.UUID {
		t.Fatalf("created and configured instances share the UUID %s", ct.UUID)
	}
	for id, want := range map[string]string{taken: st.UUID, created: ct.UUID} {
		out, _ := os.ReadFile(filepath.Join(d.JobDir(id), "stdout.log"))
		if got, _, _ := strings.Cut(string(out), " "); got != want {
			t.Errorf("job %s sees CUDA_VISIBLE_DEVICES %q, want %q", id, got, want)
		}
	}
	drain(t, d, gates)
}

// A daemon restarted while a MIG job runs books its instance again: a
// created one at its start, so a new job cannot take its slices.
func TestMIGRebookedAfterRestart(t *testing.T) {
	state := t.TempDir()
	nodes, err := simulated.Parse([]byte(`nodes: [{name: h, gpus: 1xH100-SXM, overrides: [{index: 0, migManaged: true}]}]`), catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	withNodes := func(c *Config) { c.Nodes = nodes }
	d := startDaemon(t, state, "1xL4", withNodes)
	gates := t.TempDir()
	a := submit(t, d, gatedJob(gates, map[string]string{"mig-profile": "7g.80gb"}, 0)).ID
	eventually(t, "7g.80gb runs", func() bool { return started(t, d, a) })
	d.shutdown()
	d2 := startDaemon(t, state, "1xL4", withNodes)
	m := migGPU(t, d2, 0)
	if len(m.Instances) != 1 || !m.Instances[0].InUse || m.Instances[0].Start != 0 {
		t.Fatalf("after restart the snapshot has %+v, want the 7g.80gb at 0 in use", m.Instances)
	}
	b := submit(t, d2, gatedJob(gates, map[string]string{"mig-profile": "1g.10gb"}, 0)).ID
	d2.schedule()
	if st := states(t, d2)[b]; st != api.Queued {
		t.Fatalf("1g.10gb beside a re-booked 7g.80gb: %s, want queued", st)
	}
	openGate(t, gates, a, 0)
	eventually(t, "1g.10gb runs after the 7g.80gb ends", func() bool { return started(t, d2, b) })
	drain(t, d2, gates)
}

// parseFields parses submission fields as the daemon does.
func parseFields(t *testing.T, d *testDaemon, fields map[string]string) request.GPU {
	t.Helper()
	g, err := d.parseGPU(fields)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestMIGRejected(t *testing.T) {
	tests := []struct {
		name   string
		nodes  string
		fields map[string]string
		field  string
		want   []string
	}{
		{"MIG with a fraction", `nodes: [{name: a, gpus: 1xA100-80GB, overrides: [{index: 0, migManaged: true}]}]`,
			map[string]string{"mig-profile": "1g.10gb", "compute": "0.5"}, "mig-profile", []string{"--gpu-fraction"}},
		{"profile the model lacks", `nodes: [{name: a, gpus: 1xA100-80GB, overrides: [{index: 0, migManaged: true}]}]`,
			map[string]string{"mig-profile": "1g.18gb"}, "mig-profile", []string{`"1g.18gb"`, "A100-80GB has 1g.10gb"}},
		{"more MIG GPUs than offer the profile", `nodes: [{name: a, gpus: 1xH100+1xL4, overrides: [{index: 0, migManaged: true}]}]`,
			map[string]string{"mig-profile": "1g.10gb", "count": "2"}, "count", []string{`must be at most 1 with --mig 1g.10gb`, `got "2"`}},
		{"profile absent from a fixed layout", `nodes: [{name: a, gpus: 1xA100-80GB, overrides: [{index: 0, migInstances: [1g.10gb]}]}]`,
			map[string]string{"mig-profile": "3g.40gb"}, "mig-profile", []string{"layout is fixed", `got "3g.40gb"`}},
		{"MIG-capable GPUs not in MIG mode", `nodes: [{name: a, gpus: 2xH100-SXM}]`,
			map[string]string{"mig-profile": "1g.10gb"}, "mig-profile", []string{"none of its GPUs is in MIG mode", "H100-SXM support MIG", "never switches MIG mode"}},
		{"no MIG-capable GPUs", `nodes: [{name: a, gpus: 1xL4}]`,
			map[string]string{"mig-profile": "1g.10gb"}, "mig-profile", []string{"none of them supports MIG"}},
		{"model without MIG mode", `nodes: [{name: a, gpus: 1xL4+1xA100-80GB, overrides: [{index: 1, migManaged: true}]}]`,
			map[string]string{"mig-profile": "1g.10gb", "model": "L4"}, "mig-profile", []string{"of the models --model allows"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startMIGDaemon(t, tt.nodes)
			_, err := d.Submit(api.SubmitRequest{GPU: tt.fields, Command: []string{"/bin/true"}})
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("err = %v, want an InputError on %s", err, tt.field)
			}
			for _, w := range tt.want {
				if !strings.Contains(ie.Msg, w) {
					t.Errorf("message %q lacks %q", ie.Msg, w)
				}
			}
			if ie.Field == "mig-profile" && FlagOf(ie.Field) != "--mig" {
				t.Errorf("flag of %s = %s", ie.Field, FlagOf(ie.Field))
			}
		})
	}
}

// A fractional or whole-GPU job on a host whose only GPU is in MIG mode
// can never run: it is refused at submission.
func TestShareRefusedOnMIGOnlyHost(t *testing.T) {
	d := startMIGDaemon(t, `nodes: [{name: a, gpus: 1xA100-80GB, overrides: [{index: 0, migManaged: true}]}]`)
	for _, f := range []map[string]string{{"compute": "0.5"}, {"count": "1"}} {
		_, err := d.Submit(api.SubmitRequest{GPU: f, Command: []string{"/bin/true"}})
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%v: err = %v, want an InputError", f, err)
			continue
		}
		if !strings.Contains(ie.Msg, "1 GPU is in MIG mode, which take only --mig jobs") {
			t.Errorf("%v: %q does not say the GPU is in MIG mode", f, ie.Msg)
		}
	}
}
