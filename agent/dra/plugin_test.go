package dra

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/handoff"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

const uidA = "0b6f8f6e-5a0e-4a57-9a2f-6a1a3c2b4d01"
const uidB = "9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e02"

func readSpec(t *testing.T, path string) cdi.Spec {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("CDI spec: %v", err)
	}
	var s cdi.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("CDI spec %s: %v", path, err)
	}
	return s
}

func specPath(e *env, uid string) string {
	return filepath.Join(e.cdiDir, "gpu.tessera.io-claim_"+uid+".json")
}

func TestPrepareShareWithBurst(t *testing.T) {
	e := newEnv(t)
	claim := shareClaim("half", uidA, "node-a", "gpu-0", shareConfig)
	e.store(claim)
	p, kubelet, _ := e.start()

	got := prepare(t, kubelet, claim)[uidA]
	if got == nil || got.Error != "" {
		t.Fatalf("prepare: %+v", got)
	}
	want := &drapb.NodePrepareResourceResponse{Devices: []*drapb.Device{{
		RequestNames: []string{"gpu"}, PoolName: "node-a", DeviceName: "gpu-0",
		CdiDeviceIds: []string{"gpu.tessera.io/claim=" + uidA}, ShareId: proto.String("share-" + uidA),
	}}}
	if !proto.Equal(got, want) {
		t.Errorf("prepare answered %v, want %v", got, want)
	}

	// The arbiter seats the claim's guarantee and burst limit, with its
	// state folder under the run folder.
	key := "dra-" + uidA
	s, ok := e.arb.seat(key)
	if !ok {
		t.Fatalf("no arbiter seat %s", key)
	}
	if len(s.gpus) != 1 || s.gpus[0].UUID != "GPU-aaaa" || s.gpus[0].ComputeMilli != 500 || s.gpus[0].ComputeLimitMilli != 800 {
		t.Errorf("seat %+v, want GPU-aaaa with guarantee 500 and limit 800", s.gpus)
	}
	if s.dir != filepath.Join(e.run, key) {
		t.Errorf("seat state folder %s, want %s", s.dir, filepath.Join(e.run, key))
	}
	if fi, err := os.Stat(s.dir); err != nil || !fi.IsDir() {
		t.Errorf("state folder %s: %v", s.dir, err)
	}

	// The CDI spec carries what handoff.Build gives the device plugin's
	// container for the same shares (library resolved to its versioned
	// file), and the GPU's device nodes.
	spec := readSpec(t, specPath(e, uidA))
	if spec.Kind != "gpu.tessera.io/claim" || len(spec.Devices) != 1 || spec.Devices[0].Name != uidA {
		t.Fatalf("spec kind %s devices %+v, want one device %s of kind gpu.tessera.io/claim", spec.Kind, spec.Devices, uidA)
	}
	paths := e.paths
	paths.HostInterceptLibrary = e.libFile
	h := handoff.Build(paths, key, s.gpus)
	edits := spec.Devices[0].ContainerEdits
	if wantEnv := envList(h.Env); !slices.Equal(edits.Env, wantEnv) {
		t.Errorf("spec env %v,\nwant handoff's %v", edits.Env, wantEnv)
	}
	for _, v := range []string{"TESSERA_COMPUTE_REQUEST=500m", "TESSERA_COMPUTE_LIMIT=800m", "NVIDIA_VISIBLE_DEVICES=GPU-aaaa",
		"TESSERA_CONTAINER_ID=" + key, "LD_PRELOAD=" + handoff.ContainerInterceptLibrary} {
		if !slices.Contains(edits.Env, v) {
			t.Errorf("spec env lacks %s: %v", v, edits.Env)
		}
	}
	if len(edits.Mounts) != len(h.Mounts) {
		t.Fatalf("spec mounts %+v, want handoff's %+v", edits.Mounts, h.Mounts)
	}
	for i, m := range h.Mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		got := edits.Mounts[i]
		if got.HostPath != m.HostPath || got.ContainerPath != m.ContainerPath || !slices.Contains(got.Options, mode) {
			t.Errorf("spec mount %d = %+v, want %+v (%s)", i, got, m, mode)
		}
	}
	if !slices.ContainsFunc(edits.Mounts, func(m cdi.Mount) bool { return m.HostPath == e.libFile }) {
		t.Errorf("spec mounts %+v do not mount the versioned library %s", edits.Mounts, e.libFile)
	}
	var nodes []string
	for _, n := range edits.DeviceNodes {
		nodes = append(nodes, n.Path)
	}
	if want := []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia4"}; !slices.Equal(nodes, want) {
		t.Errorf("spec device nodes %v, want %v", nodes, want)
	}

	// Kubelet asks again (a retry, or its restart): the same answer, no
	// second seat.
	if again := prepare(t, kubelet, claim)[uidA]; !proto.Equal(again, want) {
		t.Errorf("second prepare answered %v, want %v", again, want)
	}
	if seats, registers := e.arb.count(); seats != 1 || registers != 1 {
		t.Errorf("after two prepares: %d seats, %d registrations; want 1 and 1", seats, registers)
	}
	if pc := p.Prepared(); len(pc) != 1 || pc[0].UID != uidA || pc[0].Namespace != "ml" || pc[0].Name != "half" {
		t.Errorf("prepared claims %+v, want ml/half", pc)
	}

	// Unprepare releases the seat, the spec, the state folder and the record.
	if r := unprepare(t, kubelet, claim)[uidA]; r == nil || r.Error != "" {
		t.Fatalf("unprepare: %+v", r)
	}
	if _, ok := e.arb.seat(key); ok {
		t.Error("the seat outlives unprepare")
	}
	if _, err := os.Stat(specPath(e, uidA)); !os.IsNotExist(err) {
		t.Errorf("the CDI spec outlives unprepare: %v", err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("the state folder outlives unprepare: %v", err)
	}
	if pc := p.Prepared(); len(pc) != 0 {
		t.Errorf("prepared claims after unprepare: %+v", pc)
	}
	// Unpreparing a claim not prepared (again, or never) succeeds.
	never := shareClaim("never", uidB, "node-a", "gpu-0", shareConfig)
	for uid, r := range unprepare(t, kubelet, claim, never) {
		if r.Error != "" {
			t.Errorf("unprepare of %s, not prepared: %s", uid, r.Error)
		}
	}
}

func TestPrepareTwoClaimsOnOneGPU(t *testing.T) {
	e := newEnv(t)
	e.paths.CDI = true // GPUs also as nvidia.com/gpu=UUID, whose spec brings the driver's files
	a := shareClaim("a", uidA, "node-a", "gpu-0", shareConfig)
	b := shareClaim("b", uidB, "node-a", "gpu-0", shareConfig)
	e.store(a, b)
	_, kubelet, _ := e.start()
	got := prepare(t, kubelet, a, b)
	for _, uid := range []string{uidA, uidB} {
		r := got[uid]
		if r == nil || r.Error != "" || len(r.Devices) != 1 {
			t.Fatalf("prepare %s: %+v", uid, r)
		}
		if want := []string{"gpu.tessera.io/claim=" + uid, "nvidia.com/gpu=GPU-aaaa"}; !slices.Equal(r.Devices[0].CdiDeviceIds, want) {
			t.Errorf("claim %s: CDI devices %v, want %v", uid, r.Devices[0].CdiDeviceIds, want)
		}
		s, ok := e.arb.seat("dra-" + uid)
		if !ok || len(s.gpus) != 1 || s.gpus[0].UUID != "GPU-aaaa" || s.gpus[0].ComputeMilli != 500 {
			t.Errorf("claim %s: seat %+v (found %v), want 500m of GPU-aaaa", uid, s, ok)
		}
		env := readSpec(t, specPath(e, uid)).Devices[0].ContainerEdits.Env
		if !slices.Contains(env, "NVIDIA_VISIBLE_DEVICES=void") || !slices.Contains(env, "TESSERA_CONTAINER_ID=dra-"+uid) {
			t.Errorf("claim %s: env %v, want NVIDIA_VISIBLE_DEVICES=void (devices come from CDI) and its own container ID", uid, env)
		}
	}
	// Releasing one leaves the other.
	unprepare(t, kubelet, a)
	if _, ok := e.arb.seat("dra-" + uidB); !ok {
		t.Error("unpreparing claim a released claim b's seat")
	}
	if _, err := os.Stat(specPath(e, uidB)); err != nil {
		t.Errorf("unpreparing claim a removed claim b's spec: %v", err)
	}
}

func TestRestartKeepsPreparedClaims(t *testing.T) {
	e := newEnv(t)
	claim := shareClaim("half", uidA, "node-a", "gpu-0", shareConfig)
	e.store(claim)
	_, kubelet, stop := e.start()
	first := prepare(t, kubelet, claim)[uidA]
	if first.Error != "" {
		t.Fatal(first.Error)
	}
	before, err := os.ReadFile(specPath(e, uidA))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	// A spec some prepare wrote but did not record (the agent stopped in
	// between) is removed at start; other files stay.
	orphan := specPath(e, "orphan-uid")
	other := filepath.Join(e.cdiDir, "nvidia.yaml")
	for _, f := range []string{orphan, other} {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// So is its state folder; the device plugin's folders stay.
	orphanDir, pluginDir := filepath.Join(e.run, "dra-orphan-uid"), filepath.Join(e.run, "tsr-0123456789abcdef0123")
	for _, d := range []string{orphanDir, pluginDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The agent restarts: a new arbiter (it lives in the agent) and a new
	// plugin on the same folders.
	e.arb = newFakeArbiter()
	p, kubelet, _ := e.start()
	s, ok := e.arb.seat("dra-" + uidA)
	if !ok || len(s.gpus) != 1 || s.gpus[0].ComputeMilli != 500 || s.gpus[0].ComputeLimitMilli != 800 {
		t.Fatalf("after restart: seat %+v (found %v), want the claim's 500/800 again", s, ok)
	}
	after, err := os.ReadFile(specPath(e, uidA))
	if err != nil || string(after) != string(before) {
		t.Errorf("after restart the spec is %q (%v), want it kept as %q", after, err, before)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("the orphan spec survives the restart: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another spec in the CDI folder was touched: %v", err)
	}
	if _, err := os.Stat(orphanDir); !os.IsNotExist(err) {
		t.Errorf("the orphan state folder survives the restart: %v", err)
	}
	for _, d := range []string{pluginDir, filepath.Join(e.run, "dra-"+uidA)} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("state folder %s was removed at restart: %v", d, err)
		}
	}
	if len(p.Prepared()) != 1 {
		t.Errorf("prepared after restart: %+v", p.Prepared())
	}
	// kubelet's retry gets the same answer; unprepare works.
	if again := prepare(t, kubelet, claim)[uidA]; !proto.Equal(again, first) {
		t.Errorf("prepare after restart answered %v, want %v", again, first)
	}
	if r := unprepare(t, kubelet, claim)[uidA]; r.Error != "" {
		t.Fatalf("unprepare after restart: %s", r.Error)
	}
	if seats, _ := e.arb.count(); seats != 0 {
		t.Errorf("%d seats left after unprepare", seats)
	}
	if _, err := os.Stat(specPath(e, uidA)); !os.IsNotExist(err) {
		t.Errorf("spec left after unprepare: %v", err)
	}
	// And a third start finds nothing to restore.
	e.arb = newFakeArbiter()
	p3, err := New(context.Background(), e.config())
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := e.arb.count(); n != 0 || len(p3.Prepared()) != 0 {
		t.Errorf("after unprepare and restart: %d seats, prepared %+v", n, p3.Prepared())
	}
}

func TestPrepareRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claim  *testClaim
		refuse error
		want   string
	}{
		{name: "device of another node", claim: &testClaim{pool: "node-b", device: "gpu-0", params: shareConfig},
			want: "claim ml/bad: status.allocation.devices.results[0]: device gpu-0 of pool node-b, not of this node node-a"},
		{name: "device the node lacks", claim: &testClaim{pool: "node-a", device: "gpu-5", params: shareConfig},
			want: "claim ml/bad: status.allocation.devices.results[0]: node node-a has no device gpu-5"},
		{name: "burst below the guarantee", claim: &testClaim{pool: "node-a", device: "gpu-0", params: `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.25"}`},
			want: "computeLimit: must be in [0.5, 1]"},
		{name: "unknown config field", claim: &testClaim{pool: "node-a", device: "gpu-0", params: `{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","burst":"0.9"}`},
			want: "claim ml/bad: status.allocation.devices.config[0] (FromClaim)"},
		{name: "arbiter refuses", claim: &testClaim{pool: "node-a", device: "gpu-0", params: shareConfig}, refuse: errors.New("guarantees would sum to 1100"),
			want: "claim ml/bad: enforce GPU shares: guarantees would sum to 1100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := shareClaim("bad", uidA, tc.claim.pool, tc.claim.device, tc.claim.params)
			e.store(c)
			e.arb.refuse = tc.refuse
			p, kubelet, _ := e.start()
			r := prepare(t, kubelet, c)[uidA]
			if r == nil || !strings.Contains(r.Error, tc.want) {
				t.Fatalf("prepare answered %+v, want an error saying %q", r, tc.want)
			}
			if len(r.Devices) != 0 {
				t.Errorf("a refused claim got devices %v", r.Devices)
			}
			// Nothing is left of the refused claim.
			if n, _ := e.arb.count(); n != 0 {
				t.Errorf("%d seats after a refusal", n)
			}
			if _, err := os.Stat(specPath(e, uidA)); !os.IsNotExist(err) {
				t.Errorf("a refused claim has a CDI spec: %v", err)
			}
			if _, err := os.Stat(filepath.Join(e.run, "dra-"+uidA)); !os.IsNotExist(err) {
				t.Errorf("a refused claim has a state folder: %v", err)
			}
			if len(p.Prepared()) != 0 {
				t.Errorf("a refused claim is recorded: %+v", p.Prepared())
			}
		})
	}
}

type testClaim struct{ pool, device, params string }

func TestPrepareMPS(t *testing.T) {
	e := newEnv(t)
	pipe := filepath.Join(e.root, "mps", "GPU-aaaa", "pipe")
	e.mps = fakeMPS{pipe: pipe}
	c := shareClaim("half", uidA, "node-a", "gpu-0", shareConfig)
	two := shareClaim("two", uidB, "node-a", "gpu-0", shareConfig)
	r := two.Status.Allocation.Devices.Results[0]
	r.Device = "gpu-1"
	two.Status.Allocation.Devices.Results = append(two.Status.Allocation.Devices.Results, r)
	e.store(c, two)
	_, kubelet, _ := e.start()
	got := prepare(t, kubelet, c, two)
	if got[uidA].Error != "" {
		t.Fatalf("prepare on an MPS node: %s", got[uidA].Error)
	}
	edits := readSpec(t, specPath(e, uidA)).Devices[0].ContainerEdits
	if !slices.Contains(edits.Env, "CUDA_MPS_PIPE_DIRECTORY="+pipe) || !slices.Contains(edits.Env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50") {
		t.Errorf("MPS env missing: %v", edits.Env)
	}
	if !slices.ContainsFunc(edits.Mounts, func(m cdi.Mount) bool { return m.HostPath == pipe && m.ContainerPath == pipe }) {
		t.Errorf("MPS pipe folder not mounted: %+v", edits.Mounts)
	}
	if want := "allocates 2 GPUs of gpu.tessera.io; on an MPS node"; !strings.Contains(got[uidB].Error, want) {
		t.Errorf("two GPUs on an MPS node: %q, want an error saying %q", got[uidB].Error, want)
	}
}

type fakeMPS struct{ pipe string }

func (f fakeMPS) ClientEnv(context.Context, string) (map[string]string, error) {
	return map[string]string{handoff.EnvMPSPipeDir: f.pipe, handoff.EnvMPSThreadPercentage: "50"}, nil
}

func TestNewRefusesForeignJournal(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.state, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ content, want string }{
		{`{"version":1,"node":"node-b","claims":[]}`, `belongs to node "node-b", not "node-a"`},
		{`{"version":2,"node":"node-a","claims":[]}`, "version: must be 1, got 2"},
		{`{"version":1,"node":"node-a","claims":[{"uid":"x"}]}`, "claims[0]: uid, key and shares must be set"},
	} {
		if err := os.WriteFile(filepath.Join(e.state, JournalFile), []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := New(context.Background(), e.config()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("journal %s: error %v, want one saying %q", tc.content, err, tc.want)
		}
	}
}

// The device plugin and the DRA plugin hand a share's container the same
// handoff; this pins that the spec's shares are kube/dra's reading of the
// claim, guarantee and burst, on the GPU the allocation names.
func TestSharesOfClaimMatchSeat(t *testing.T) {
	e := newEnv(t)
	c := shareClaim("half", uidA, "node-a", "gpu-1", shareConfig)
	e.store(c)
	_, kubelet, _ := e.start()
	if r := prepare(t, kubelet, c)[uidA]; r.Error != "" {
		t.Fatal(r.Error)
	}
	n := testNode()
	want, err := kdra.Shares(c, &n, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := e.arb.seat("dra-" + uidA)
	if !slices.Equal(s.gpus, want) || want[0].UUID != "GPU-bbbb" {
		t.Errorf("seat %+v, want kube/dra's shares %+v on GPU-bbbb", s.gpus, want)
	}
	var nodes []string
	for _, d := range readSpec(t, specPath(e, uidA)).Devices[0].ContainerEdits.DeviceNodes {
		nodes = append(nodes, d.Path)
	}
	if !slices.Contains(nodes, "/dev/nvidia7") || slices.Contains(nodes, "/dev/nvidia4") {
		t.Errorf("device nodes %v, want GPU-bbbb's /dev/nvidia7 only", nodes)
	}
}

func TestServeRefusesBadOptions(t *testing.T) {
	e := newEnv(t)
	p, err := New(context.Background(), e.config())
	if err != nil {
		t.Fatal(err)
	}
	ok := ServeOptions{Client: e.client, NodeName: "node-a", PluginDir: e.plugin, RegistryDir: e.registry}
	for _, tc := range []struct {
		name string
		edit func(*ServeOptions)
		want string
	}{
		{"no client", func(o *ServeOptions) { o.Client = nil }, "a Kubernetes client must be set"},
		{"no node", func(o *ServeOptions) { o.NodeName = "" }, "node name must be set"},
		{"relative plugin dir", func(o *ServeOptions) { o.PluginDir = "plugins" }, `plugin dir: must be an absolute path, got "plugins"`},
		{"missing registry", func(o *ServeOptions) { o.RegistryDir = filepath.Join(e.root, "none") }, "registry dir: must be kubelet's existing plugin registration folder"},
	} {
		o := ok
		tc.edit(&o)
		if err := p.Serve(context.Background(), o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
