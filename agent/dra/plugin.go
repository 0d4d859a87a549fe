package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/libinstall"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/inventory"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
	"github.com/tessera-gpu/tessera/migctl"
)

// CDI identity of the claims' specs.
const (
	// CDIKind is the CDI vendor/class of a prepared claim's device; the
	// device is named by the claim's UID.
	CDIKind = kdra.DriverName + "/claim"
	// specPrefix starts the name of every claim spec file in the CDI folder.
	specPrefix = "gpu.tessera.io-claim_"
)

// Enforcer seats a claim's shares with the node arbiter (agent.Enforcer,
// arbiter.Enforcer): Register replaces an earlier registration of the key.
type Enforcer interface {
	Register(ctx context.Context, key, dir string, gpus []binding.Share) error
	Unregister(ctx context.Context, key string) error
}

// MPS gives a registered key its MPS client variables (agent.MPS, the
// arbiter in MPS mode).
type MPS interface {
	ClientEnv(ctx context.Context, key string) (map[string]string, error)
}

// MIGInstances creates and destroys the MIG instances that claims on
// managed MIG GPUs ask for, by claim key (migctl.Manager, the one the
// device plugin's allocator uses, so that neither takes the other's
// slices).
type MIGInstances interface {
	Acquire(workload string, w migctl.Want) (migctl.Instance, error)
	Release(workload string) error
	Holds(workload string) []migctl.Instance
}

// Config configures a Plugin.
type Config struct {
	// Node returns the node's inventory now; its Name is the node's (and
	// its DRA pool's) name.
	Node func() inventory.Node
	// Paths say where the node keeps what containers need, as for the
	// device plugin. Paths.CDI hands each GPU also as Paths.CDIKind=UUID.
	Paths handoff.Paths
	// Enforcer, optional, seats every prepared claim (the node arbiter).
	Enforcer Enforcer
	// MPS, set on an MPS node, adds each claim's MPS client variables; it
	// needs Enforcer, which registers the claim first.
	MPS MPS
	// StateDir holds the journal of prepared claims (must survive
	// restarts). Absolute.
	StateDir string
	// CDIDir is the folder the container runtime reads CDI specs from.
	// Absolute.
	CDIDir string
	// Locate finds the device nodes of GPUs (cdi.Locate through NVML);
	// nil on simulated GPUs, whose specs then name no device nodes.
	Locate func(uuids []string) ([]cdi.Unit, error)
	// HostRoot is where the host's /dev is seen ("" is "/"), for the
	// driver's control nodes; used only with Locate.
	HostRoot string
	// Catalog names the MIG profiles of MIG devices (kdra.Shares); nil
	// refuses them.
	Catalog *catalog.Catalog
	// MIG, set on a node with managed MIG GPUs, creates the instance a
	// claim's MIG device stands for at prepare and destroys it at
	// unprepare; MIGChanged, when set, is called after either (the agent
	// publishes the node again). Without MIG such claims are refused.
	MIG        MIGInstances
	MIGChanged func()
	Log        *slog.Logger
}

// Plugin prepares and unprepares claims (kubeletplugin.DRAPlugin).
type Plugin struct {
	cfg    Config
	common cdi.ContainerEdits // edits every claim's device carries (control nodes)
	mu     sync.Mutex
	j      *journal
	now    func() time.Time
	fatal  chan error // HandleError's fatal errors, for Serve
}

var _ kubeletplugin.DRAPlugin = (*Plugin)(nil)

// New checks cfg, loads the journal, removes the CDI specs of claims it
// does not record, and restores the recorded claims: each is seated with
// the enforcer again and its spec rewritten when missing or changed. A
// claim that cannot be seated again is logged and kept, so that kubelet's
// unprepare still finds it.
func New(ctx context.Context, cfg Config) (*Plugin, error) {
	switch {
	case cfg.Node == nil:
		return nil, errors.New("DRA plugin: node inventory must be set")
	case !filepath.IsAbs(cfg.StateDir):
		return nil, fmt.Errorf("DRA plugin: state dir: must be an absolute path, got %q", cfg.StateDir)
	case !filepath.IsAbs(cfg.CDIDir):
		return nil, fmt.Errorf("DRA plugin: CDI dir: must be an absolute path, got %q", cfg.CDIDir)
	case cfg.MPS != nil && cfg.Enforcer == nil:
		return nil, errors.New("DRA plugin: MPS mode needs an enforcer (the node arbiter registers each claim before it gets its MPS variables)")
	}
	if err := cfg.Paths.Validate(); err != nil {
		return nil, fmt.Errorf("DRA plugin: %w", err)
	}
	node := cfg.Node()
	if node.Name == "" {
		return nil, errors.New("DRA plugin: the node inventory has no node name")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	// The driver's libraries and hooks come with the GPUs' own CDI
	// devices (Paths.CDI) or the NVIDIA runtime's hook
	// (NVIDIA_VISIBLE_DEVICES), not from this spec: copying them here
	// would apply them twice.
	var common cdi.ContainerEdits
	if cfg.Locate != nil {
		nodes, err := cdi.ControlNodes(cfg.HostRoot)
		if err != nil {
			return nil, fmt.Errorf("DRA plugin: %w", err)
		}
		common = common.WithNodes(nodes...)
	}
	j, err := openJournal(filepath.Join(cfg.StateDir, JournalFile), node.Name)
	if err != nil {
		return nil, fmt.Errorf("DRA plugin: %w", err)
	}
	p := &Plugin{cfg: cfg, common: common, j: j, now: time.Now, fatal: make(chan error, 1)}
	if err := p.restore(ctx); err != nil {
		return nil, fmt.Errorf("DRA plugin: %w", err)
	}
	return p, nil
}

// Prepared returns the claims prepared now.
func (p *Plugin) Prepared() []Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.j.claims()
}

// restore removes the specs and state folders of claims not recorded,
// then seats recorded claims again and rewrites their specs as recorded.
func (p *Plugin) restore(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	recorded, keys := map[string]Claim{}, map[string]bool{}
	for _, c := range p.j.claims() {
		recorded[specFile(c.UID)] = c
		keys[c.Key] = true
	}
	folders, err := os.ReadDir(p.cfg.Paths.HostStateRoot)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("state root: %w", err)
	}
	for _, f := range folders {
		if keys[f.Name()] || !strings.HasPrefix(f.Name(), keyPrefix) {
			continue
		}
		if err := os.RemoveAll(p.cfg.Paths.HostStateDir(f.Name())); err != nil {
			return fmt.Errorf("remove the state folder of a claim not prepared: %w", err)
		}
	}
	entries, err := os.ReadDir(p.cfg.CDIDir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("CDI dir: %w", err)
	}
	for _, e := range entries {
		if _, ok := recorded[e.Name()]; ok || !strings.HasPrefix(e.Name(), specPrefix) {
			continue
		}
		// Written by a prepare that did not finish (the agent stopped
		// before recording it); kubelet prepares the claim again.
		if err := os.Remove(filepath.Join(p.cfg.CDIDir, e.Name())); err != nil {
			return fmt.Errorf("remove the CDI spec of a claim not prepared: %w", err)
		}
		p.cfg.Log.Info("removed the CDI spec of a claim not prepared", "file", e.Name())
	}
	for _, c := range p.j.claims() {
		if err := p.writeSpec(c); err != nil {
			return fmt.Errorf("claim %s/%s (uid %s): %w", c.Namespace, c.Name, c.UID, err)
		}
		if err := p.seat(ctx, c.Key, c.Shares); err != nil {
			p.cfg.Log.Warn("cannot seat a prepared claim again", "claim", c.Namespace+"/"+c.Name, "uid", c.UID, "key", c.Key, "error", err)
		}
		p.checkMIG(c)
	}
	if n := len(recorded); n > 0 {
		p.cfg.Log.Info("restored prepared DRA claims", "count", n)
	}
	return nil
}

// PrepareResourceClaims prepares each claim (kubeletplugin.DRAPlugin). A
// claim already prepared (same UID) gets the answer it got before.
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devs, err := p.prepare(ctx, claim)
		if err != nil {
			p.cfg.Log.Warn("cannot prepare claim", "claim", claim.Namespace+"/"+claim.Name, "uid", claim.UID, "error", err)
			out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: devs}
	}
	return out, nil
}

func (p *Plugin) prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	name := claim.Namespace + "/" + claim.Name
	uid := string(claim.UID)
	if c, ok := p.j.get(uid); ok {
		return answer(c.Devices), nil
	}
	if err := cdi.ValidateName(uid); err != nil {
		return nil, fmt.Errorf("claim %s: metadata.uid: %w", name, err)
	}
	node := p.cfg.Node()
	shares, err := kdra.Shares(claim, &node, p.cfg.Catalog)
	if err != nil {
		return nil, err
	}
	key := Key(claim.UID)
	if err := p.createMIG(key, shares); err != nil {
		return nil, fmt.Errorf("claim %s: %w", name, err)
	}
	var results []resourceapi.DeviceRequestAllocationResult
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == kdra.DriverName {
			results = append(results, r)
		}
	}
	if p.cfg.MPS != nil && len(shares) != 1 {
		return nil, fmt.Errorf("claim %s: status.allocation.devices.results: allocates %d GPUs of %s; on an MPS node (--sharing mps) a claim must have exactly one GPU, since CUDA_MPS_PIPE_DIRECTORY names one GPU's MPS daemon", name, len(shares), kdra.DriverName)
	}
	c := Claim{UID: uid, Namespace: claim.Namespace, Name: claim.Name, Key: key, Shares: byIndex(shares), Prepared: p.now().UTC()}
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			c.Pods = append(c.Pods, r.Name)
		}
	}
	undo := func(err error) ([]kubeletplugin.Device, error) {
		p.release(ctx, c)
		return nil, fmt.Errorf("claim %s: %w", name, err)
	}
	paths := p.cfg.Paths
	if paths.HostInterceptLibrary != "" {
		if paths.HostInterceptLibrary, err = libinstall.Resolve(paths.HostInterceptLibrary); err != nil {
			return undo(err)
		}
	}
	h := handoff.Build(paths, key, c.Shares)
	if err := os.MkdirAll(p.cfg.Paths.HostStateDir(key), 0o755); err != nil {
		return undo(fmt.Errorf("create state folder: %w", err))
	}
	if err := p.seat(ctx, key, c.Shares); err != nil {
		return undo(err)
	}
	if p.cfg.MPS != nil {
		env, err := p.cfg.MPS.ClientEnv(ctx, key)
		if err != nil {
			return undo(fmt.Errorf("MPS client settings: %w", err))
		}
		if err := h.AddMPS(env); err != nil {
			return undo(fmt.Errorf("MPS client settings: %w", err))
		}
	}
	if c.Spec, err = p.buildSpec(uid, h, c.Shares); err != nil {
		return undo(err)
	}
	id := CDIKind + "=" + uid
	for i, r := range results {
		d := Device{Requests: []string{r.Request}, Pool: r.Pool, Device: r.Device, CDIDeviceIDs: []string{id}}
		// The handoff's CDI name of this GPU (Paths.CDI), which brings
		// the driver's own edits; shares[i] is result i's GPU.
		for _, gpu := range h.CDIDevices {
			if strings.HasSuffix(gpu, "="+shares[i].UUID) {
				d.CDIDeviceIDs = append(d.CDIDeviceIDs, gpu)
			}
		}
		if r.ShareID != nil {
			d.ShareID = string(*r.ShareID)
		}
		c.Devices = append(c.Devices, d)
	}
	if err := p.writeSpec(c); err != nil {
		return undo(err)
	}
	// Recorded before kubelet hears of it: a restarted agent keeps it.
	if err := p.j.put(c); err != nil {
		return undo(fmt.Errorf("record prepared claim: %w", err))
	}
	p.cfg.Log.Info("prepared claim", "claim", name, "uid", uid, "key", key, "gpus", len(c.Shares))
	if createsMIG(c.Shares) && p.cfg.MIGChanged != nil {
		p.cfg.MIGChanged()
	}
	return answer(c.Devices), nil
}

// createMIG creates, for claim key, each MIG instance its shares ask the
// node to create, and names it in the share (its UUID). On a failure
// nothing created for key is kept.
func (p *Plugin) createMIG(key string, shares []binding.Share) error {
	for i, sh := range shares {
		if sh.MIG == nil || !sh.MIG.Create {
			continue
		}
		if p.cfg.MIG == nil {
			return fmt.Errorf("status.allocation: a %s instance at slice %d of GPU %s is to be created, but the agent manages no MIG GPU", sh.MIGProfile, sh.MIG.Start, sh.MIG.GPU)
		}
		inst, err := p.cfg.MIG.Acquire(key, migctl.WantOf(sh))
		if err != nil {
			if rerr := p.cfg.MIG.Release(key); rerr != nil {
				p.cfg.Log.Warn("cannot destroy the MIG instances of a claim not prepared", "key", key, "error", rerr)
			}
			return fmt.Errorf("create MIG instance: %w", err)
		}
		shares[i].UUID = inst.UUID
	}
	return nil
}

// checkMIG warns when a restored claim's MIG instances are not the ones
// the agent holds for it now (agent.Config.MIGWanted adopts them; one
// recreated after it vanished has another UUID, and the claim's
// containers must be started again).
func (p *Plugin) checkMIG(c Claim) {
	if !createsMIG(c.Shares) {
		return
	}
	var held []migctl.Instance
	if p.cfg.MIG != nil {
		held = p.cfg.MIG.Holds(c.Key)
	}
	for _, sh := range c.Shares {
		if sh.MIG != nil && sh.MIG.Create && !slices.ContainsFunc(held, func(in migctl.Instance) bool { return in.UUID == sh.UUID }) {
			p.cfg.Log.Warn("a prepared claim's MIG instance is not the one it was given; its containers have to be started again",
				"claim", c.Namespace+"/"+c.Name, "uid", c.UID, "instance", sh.UUID)
		}
	}
}

// createsMIG reports whether shares hold MIG instances made for them.
func createsMIG(shares []binding.Share) bool {
	return slices.ContainsFunc(shares, func(s binding.Share) bool { return s.MIG != nil && s.MIG.Create })
}

// RecordedMIG reads node's journal in stateDir (none: no claims) and
// returns the MIG instances its prepared claims hold, by claim key: the
// agent adopts them when it starts (agent.Config.MIGWanted) instead of
// destroying them as ended.
func RecordedMIG(stateDir, node string) (map[string][]migctl.Want, error) {
	j, err := openJournal(filepath.Join(stateDir, JournalFile), node)
	if err != nil {
		return nil, err
	}
	out := map[string][]migctl.Want{}
	for _, c := range j.claims() {
		for _, sh := range c.Shares {
			if sh.MIG != nil && sh.MIG.Create {
				out[c.Key] = append(out[c.Key], migctl.WantOf(sh))
			}
		}
	}
	return out, nil
}

// UnprepareResourceClaims releases each claim (kubeletplugin.DRAPlugin):
// its seat, CDI spec, state folder and record. A claim not prepared here
// is released already.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		c, ok := p.j.get(string(claim.UID))
		if !ok {
			out[claim.UID] = nil
			continue
		}
		err := p.release(ctx, c)
		if err == nil {
			err = p.j.remove(c.UID)
		}
		if err != nil {
			err = fmt.Errorf("claim %s (uid %s): unprepare: %w", claim.NamespacedName, claim.UID, err)
			p.cfg.Log.Warn("cannot unprepare claim", "claim", claim.NamespacedName.String(), "uid", claim.UID, "error", err)
		} else {
			p.cfg.Log.Info("unprepared claim", "claim", claim.NamespacedName.String(), "uid", claim.UID, "key", c.Key)
		}
		out[claim.UID] = err
	}
	return out, nil
}

// HandleError logs errors of the helper's background work; a fatal one
// ends Serve.
func (p *Plugin) HandleError(ctx context.Context, err error, msg string) {
	if errors.Is(err, kubeletplugin.ErrRecoverable) {
		p.cfg.Log.Warn("DRA kubelet plugin: "+msg, "error", err)
		return
	}
	p.cfg.Log.Error("DRA kubelet plugin: "+msg, "error", err)
	select {
	case p.fatal <- fmt.Errorf("%s: %w", msg, err):
	default:
	}
}

// WatchHealthStatus reports no device health to kubelet (Serve turns the
// service off): unhealthy GPUs are tainted in the ResourceSlices instead.
func (p *Plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

// Key is the allocation key of a claim: its seat with the arbiter, its
// state folder and the containers' TESSERA_CONTAINER_ID. It matches the
// interception library's container ID rule.
func Key(uid types.UID) string { return keyPrefix + string(uid) }

// keyPrefix starts every claim's key (device plugin keys start "tsr-").
const keyPrefix = "dra-"

// seat registers key's shares with the enforcer, if any.
func (p *Plugin) seat(ctx context.Context, key string, shares []binding.Share) error {
	if p.cfg.Enforcer == nil {
		return nil
	}
	if err := p.cfg.Enforcer.Register(ctx, key, p.cfg.Paths.HostStateDir(key), shares); err != nil {
		return fmt.Errorf("enforce GPU shares: %w", err)
	}
	return nil
}

// release undoes what preparing c did, except its record: the seat, the
// CDI spec and the state folder. It is safe to repeat.
func (p *Plugin) release(ctx context.Context, c Claim) error {
	var errs []error
	if p.cfg.Enforcer != nil {
		if err := p.cfg.Enforcer.Unregister(ctx, c.Key); err != nil {
			errs = append(errs, fmt.Errorf("release GPU shares: %w", err))
		}
	}
	if err := os.Remove(filepath.Join(p.cfg.CDIDir, specFile(c.UID))); err != nil && !os.IsNotExist(err) {
		errs = append(errs, fmt.Errorf("remove CDI spec: %w", err))
	}
	if err := os.RemoveAll(p.cfg.Paths.HostStateDir(c.Key)); err != nil {
		errs = append(errs, fmt.Errorf("remove state folder: %w", err))
	}
	if p.cfg.MIG != nil && createsMIG(c.Shares) {
		if err := p.cfg.MIG.Release(c.Key); err != nil {
			errs = append(errs, fmt.Errorf("destroy MIG instance: %w", err))
		} else if p.cfg.MIGChanged != nil {
			p.cfg.MIGChanged()
		}
	}
	return errors.Join(errs...)
}

// buildSpec turns a claim's handoff into its CDI spec: one device, named
// uid, with the GPUs' device nodes and the driver's control nodes, and
// the handoff's environment and mounts.
func (p *Plugin) buildSpec(uid string, h handoff.Handoff, shares []binding.Share) (cdi.Spec, error) {
	edits := p.common
	edits.Env = append(slices.Clone(edits.Env), envList(h.Env)...)
	edits.Mounts = slices.Clone(edits.Mounts)
	for _, m := range h.Mounts {
		opt := "rw"
		if m.ReadOnly {
			opt = "ro"
		}
		edits.Mounts = append(edits.Mounts, cdi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, Type: "bind", Options: []string{"rbind", opt}})
	}
	if p.cfg.Locate != nil {
		uuids := make([]string, len(shares))
		for i, s := range shares {
			uuids[i] = s.UUID
		}
		units, err := p.cfg.Locate(uuids)
		if err != nil {
			return cdi.Spec{}, fmt.Errorf("GPU device nodes: %w", err)
		}
		minors, err := cdi.MIGMinorsFor(p.cfg.HostRoot, units)
		if err != nil {
			return cdi.Spec{}, err
		}
		// A unit's device nodes as the node's own spec gives them: the
		// GPU's, and for a MIG instance its GPU and compute instance
		// capabilities.
		own, err := cdi.Build(units, minors, cdi.ContainerEdits{})
		if err != nil {
			return cdi.Spec{}, fmt.Errorf("GPU device nodes: %w", err)
		}
		for _, d := range own.Devices {
			for _, n := range d.ContainerEdits.DeviceNodes {
				edits = edits.WithNodes(n.Path)
			}
		}
	}
	version := cdi.Version
	if len(edits.AdditionalGIDs) > 0 || len(edits.IntelRdt) > 0 {
		version = "0.7.0"
	}
	return cdi.Spec{Version: version, Kind: CDIKind, Devices: []cdi.Device{{Name: uid, ContainerEdits: edits}}}, nil
}

// writeSpec writes c's spec file (atomically: a runtime reads the old
// file or the new one).
func (p *Plugin) writeSpec(c Claim) error {
	_, err := cdi.WriteFile(p.cfg.CDIDir, specFile(c.UID), c.Spec)
	return err
}

// specFile is the file name of a claim's CDI spec.
func specFile(uid string) string { return specPrefix + uid + ".json" }

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func byIndex(shares []binding.Share) []binding.Share {
	out := slices.Clone(shares)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

func answer(devs []Device) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, len(devs))
	for i, d := range devs {
		out[i] = kubeletplugin.Device{Requests: slices.Clone(d.Requests), PoolName: d.Pool, DeviceName: d.Device, CDIDeviceIDs: slices.Clone(d.CDIDeviceIDs)}
		if d.ShareID != "" {
			id := types.UID(d.ShareID)
			out[i].ShareID = &id
		}
	}
	return out
}
