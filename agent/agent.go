package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/agent/deviceplugin"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl"
)

// CheckpointFile is the checkpoint's name in the state folder.
const CheckpointFile = "allocations.json"

// MIGJournalFile is, in the state folder, the file where the MIG
// instances created for containers are booked (migctl.Manager.Journal).
const MIGJournalFile = "mig-instances.json"

// SocketName is the plugin's socket in kubelet's device-plugins folder.
const SocketName = "tessera-gpu.sock"

// Publisher publishes the node's inventory to the cluster.
type Publisher interface {
	Publish(ctx context.Context, node inventory.Node) error
}

// HealthWatcher reports GPU health changes until ctx ends (for example
// nvmlgpu's XID events).
type HealthWatcher func(ctx context.Context, report func(gpuUUID string, h inventory.Health, reason string)) error

// Config configures an Agent.
type Config struct {
	// NodeName is the Kubernetes node's name.
	NodeName string
	// Node is the discovered inventory of this host.
	Node inventory.Node
	// SlotsPerGPU is how many containers may share one GPU (device slots).
	SlotsPerGPU int
	// ResourceName is the device plugin resource (kube.ResourceGPU).
	ResourceName string
	// PluginDir is kubelet's device-plugins folder.
	PluginDir string
	// StateDir holds the checkpoint.
	StateDir string
	Paths    handoff.Paths
	Pods     PodSource
	Kubelet  KubeletPods
	// Publisher and Health are optional.
	Publisher Publisher
	Health    HealthWatcher
	// Enforcer, optional, enforces allocations (the node arbiter).
	Enforcer Enforcer
	// MPS, set on an MPS node (--sharing mps), gives each container its
	// MPS client variables; it needs Enforcer (the same arbiter), which
	// registers the container first. See docs/handoff.md, "MPS mode".
	MPS MPS
	// MIG, set on a node with GPUs whose MIG layout the operator hands to
	// Tessera, creates and destroys the MIG instances assignments ask for
	// (migctl.Manager).
	MIG MIGInstances
	// MIGWanted are the MIG instances other front doors' workloads hold on
	// the managed GPUs (the DRA plugin's prepared claims, from its
	// journal), by workload key: adopted at start as containers' are,
	// never destroyed as ended.
	MIGWanted map[string][]migctl.Want
	// ReconcileInterval is how often finished pods' allocations are
	// released (default 30s); PluginCheckInterval how often a kubelet
	// restart is looked for (default 1s).
	ReconcileInterval   time.Duration
	PluginCheckInterval time.Duration
	// NVML and HostRoot locate devices for the CDI spec when
	// Paths.CDISpecDir is set: the NVML library (nil: the host's) and where
	// the host's /dev and /proc are seen ("" is "/"). Tests replace them.
	NVML     nvml.Interface
	HostRoot string
	Log      *slog.Logger
}

// Agent is a running node agent.
type Agent struct {
	cfg     Config
	devices *Devices
	store   *checkpoint.Store
	alloc   *Allocator
	plugin  *deviceplugin.Server
	publish chan struct{} // asks the publisher loop to publish again
	// smCount is each MIG instance's SM count as discovery read it, by
	// UUID (the driver's re-read of the layout does not carry it).
	smCount map[string]int
}

// New checks cfg, loads the checkpoint and prepares the agent.
func New(cfg Config) (*Agent, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("agent: node name must be set")
	}
	if cfg.StateDir == "" || !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("agent: state dir must be an absolute path, got %q", cfg.StateDir)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 30 * time.Second
	}
	cfg.Node.Name = cfg.NodeName
	store, err := checkpoint.Open(filepath.Join(cfg.StateDir, CheckpointFile), cfg.NodeName)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	smCount := map[string]int{}
	for _, g := range cfg.Node.GPUs {
		for _, in := range g.MIGInstances {
			if in.UUID != "" && in.SMCount > 0 {
				smCount[in.UUID] = in.SMCount
			}
		}
	}
	var created []migctl.Instance
	if cfg.MIG != nil {
		if created, err = reconcileMIG(cfg, store.Entries()); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		cfg.Node = withoutCreated(cfg.Node, created)
	}
	devices, err := NewDevices(cfg.Node, cfg.SlotsPerGPU)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	var spec *cdi.Writer
	if cfg.Paths.CDISpecDir != "" {
		// Checked here too: the spec is written before the allocator
		// checks the paths.
		if err := cfg.Paths.Validate(); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		lib := cfg.NVML
		if lib == nil {
			lib = nvml.New()
		}
		spec, err = cdi.NewWriter(lib, cfg.Node, cdi.Options{Dir: cfg.Paths.CDISpecDir, BaseSpec: cfg.Paths.CDIBaseSpec, HostRoot: cfg.HostRoot})
		if err != nil {
			return nil, fmt.Errorf("agent: CDI spec: %w", err)
		}
		var uuids []string
		for _, in := range created {
			if in.UUID != "" {
				uuids = append(uuids, in.UUID)
			}
		}
		if err := spec.Add(uuids...); err != nil {
			return nil, fmt.Errorf("agent: CDI spec: MIG instances created for containers: %w", err)
		}
		cfg.Paths.CDI, cfg.Paths.CDIKind = true, cdi.Kind
		cfg.Log.Info("wrote CDI spec", "path", spec.Path(), "kind", cdi.Kind)
	}
	publish := make(chan struct{}, 1)
	acfg := AllocatorConfig{
		Node: cfg.NodeName, Paths: cfg.Paths, Pods: cfg.Pods, Kubelet: cfg.Kubelet,
		Store: store, Devices: devices, Enforcer: cfg.Enforcer, MPS: cfg.MPS, MIG: cfg.MIG, Log: cfg.Log,
		MIGChanged: func() { poke(publish) },
	}
	if spec != nil {
		acfg.CDI = spec
	}
	alloc, err := NewAllocator(acfg)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	plugin, err := deviceplugin.New(deviceplugin.Config{
		ResourceName: cfg.ResourceName, PluginDir: cfg.PluginDir, SocketName: SocketName,
		Handler: alloc, Log: cfg.Log, CheckInterval: cfg.PluginCheckInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	plugin.SetDevices(deviceplugin.Devices(devices.Slots()))
	return &Agent{cfg: cfg, devices: devices, store: store, alloc: alloc, plugin: plugin, publish: publish, smCount: smCount}, nil
}

// Registered receives after each registration with kubelet.
func (a *Agent) Registered() <-chan struct{} { return a.plugin.Registered() }

// Reconcile releases the allocations of pods that have ended (kubelet no
// longer lists them and the API server no longer shows them running) now,
// rather than at the next ReconcileInterval.
func (a *Agent) Reconcile(ctx context.Context) error { return a.alloc.Reconcile(ctx) }

// Allocations returns the recorded container allocations.
func (a *Agent) Allocations() []checkpoint.Entry { return a.store.Entries() }

// Inventory returns the node's inventory with current health and the MIG
// instances as last published (refreshMIG).
func (a *Agent) Inventory() inventory.Node { return a.devices.Node() }

// SetHealth records a GPU's health; kubelet and the cluster hear of changes.
func (a *Agent) SetHealth(gpuUUID string, h inventory.Health, reason string) {
	if !a.devices.SetHealth(gpuUUID, h, reason) {
		return
	}
	a.cfg.Log.Warn("GPU health changed", "gpu", gpuUUID, "health", h, "reason", reason)
	a.plugin.SetDevices(deviceplugin.Devices(a.devices.Slots()))
	poke(a.publish)
}

// MIGChanged asks for the node to be published again after MIG instances
// were created or destroyed for workloads the agent does not allocate
// itself (DRA claims). It does not block.
func (a *Agent) MIGChanged() { poke(a.publish) }

// poke asks the publisher loop to publish again without waiting: requests
// made while one is pending are one publish.
func poke(publish chan<- struct{}) {
	select {
	case publish <- struct{}{}:
	default:
	}
}

// Run serves kubelet, publishes the inventory, watches health and releases
// finished pods' allocations until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	goRun := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				select {
				case errc <- fmt.Errorf("%s: %w", name, err):
				default:
				}
				cancel()
			}
		}()
	}
	a.alloc.Reenforce(ctx)
	goRun("device plugin", a.plugin.Run)
	goRun("reconcile", a.reconcileLoop)
	if a.cfg.Publisher != nil {
		poke(a.publish)
		goRun("publish", a.publishLoop)
	}
	if a.cfg.Health != nil {
		goRun("health", func(ctx context.Context) error { return a.cfg.Health(ctx, a.SetHealth) })
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func (a *Agent) reconcileLoop(ctx context.Context) error {
	t := time.NewTicker(a.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := a.alloc.Reconcile(ctx); err != nil {
				a.cfg.Log.Debug("reconcile skipped", "error", err)
			}
		}
	}
}

// publishLoop publishes on start, on every health change and after every
// change of the MIG layout (refreshMIG), retrying failures with backoff up
// to a minute. Changes that arrive while a publish is pending or under way
// are published together by the next one.
func (a *Agent) publishLoop(ctx context.Context) error {
	backoff := time.Second
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.publish:
		case <-retry:
		}
		// A layout that cannot be read keeps the last one read: health
		// still gets out, and the read is retried.
		stale := a.refreshMIG()
		if stale != nil {
			a.cfg.Log.Warn("cannot read the MIG layout; publishing the last one read and retrying", "error", stale, "in", backoff)
		}
		if err := a.cfg.Publisher.Publish(ctx, a.devices.Node()); err != nil {
			a.cfg.Log.Warn("cannot publish inventory; retrying", "error", err, "in", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, time.Minute)
			continue
		}
		if stale != nil {
			retry = time.After(backoff)
			backoff = min(2*backoff, time.Minute)
			continue
		}
		retry, backoff = nil, time.Second
	}
}

// reconcileMIG runs at start on a node with managed MIG GPUs: the
// instances recorded containers were given are adopted (or created again
// when missing), those booked in the journal for containers no longer
// recorded are destroyed unless in use, and instances nobody booked (the
// operator's) are left alone. It returns the instances now held for
// containers.
func reconcileMIG(cfg Config, entries []checkpoint.Entry) ([]migctl.Instance, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	prev, err := cfg.MIG.Journal(filepath.Join(cfg.StateDir, MIGJournalFile))
	if err != nil {
		return nil, err
	}
	wanted := map[string][]migctl.Want{}
	for k, ws := range cfg.MIGWanted {
		wanted[k] = slices.Clone(ws)
	}
	for _, e := range entries {
		for _, g := range e.GPUs {
			if g.MIG != nil && g.MIG.Create {
				wanted[e.Key] = append(wanted[e.Key], migctl.WantOf(g))
			}
		}
	}
	rep, err := cfg.MIG.Reconcile(wanted, migctl.Ended(prev, wanted))
	if err != nil {
		// The agent still serves the rest of the node; what failed is
		// retried at each release.
		cfg.Log.Error("MIG instances after restart: not all settled", "error", err)
	}
	if len(rep.Adopted)+len(rep.Created)+len(rep.Destroyed)+len(rep.Busy) > 0 {
		cfg.Log.Info("MIG instances after restart", "adopted", rep.Adopted, "created", rep.Created, "destroyed", rep.Destroyed, "busy", rep.Busy)
	}
	for _, e := range entries {
		for _, g := range e.GPUs {
			if g.MIG != nil && g.MIG.Create {
				found := false
				for _, in := range cfg.MIG.Holds(e.Key) {
					found = found || in.UUID == g.UUID
				}
				if !found {
					cfg.Log.Warn("a container's MIG instance is not the one it was given; it has to be started again", "key", e.Key, "pod", e.Namespace+"/"+e.Pod, "instance", g.UUID)
				}
			}
		}
	}
	var held []migctl.Instance
	for _, w := range cfg.MIG.Workloads() {
		held = append(held, cfg.MIG.Holds(w)...)
	}
	return held, nil
}

// withoutCreated drops from node the MIG instances created for containers
// (by UUID, or by parent and start for one whose UUID is unknown): they
// are not free instances for the scheduler to hand out (each is destroyed
// when its container ends), and the scheduler books them from the
// containers' assignments.
func withoutCreated(node inventory.Node, created []migctl.Instance) inventory.Node {
	if len(created) == 0 {
		return node
	}
	node.GPUs = slices.Clone(node.GPUs)
	for i := range node.GPUs {
		g := &node.GPUs[i]
		g.MIGInstances = slices.DeleteFunc(slices.Clone(g.MIGInstances), func(in inventory.MIGInstance) bool {
			return slices.ContainsFunc(created, func(c migctl.Instance) bool {
				return (c.UUID != "" && c.UUID == in.UUID) || (c.GPU == g.UUID && in.Start != nil && *in.Start == c.Start)
			})
		})
	}
	return node
}

// refreshMIG brings the inventory's MIG instances up to date before a
// publish: each managed GPU's instances re-read from the driver
// (migctl.Manager.Layout, the one source of what exists), and on every GPU
// in MIG mode an instance marked in use when a container holds it (the
// manager booked it to a container, or a recorded allocation names it).
// The GPUNode then shows the instances created for containers and which
// are taken (docs/mig.md, "The published layout").
func (a *Agent) refreshMIG() error {
	held := map[string]bool{}
	for _, e := range a.store.Entries() {
		for _, g := range e.GPUs {
			if g.MIG != nil || g.MIGProfile != "" {
				held[g.UUID] = true
			}
		}
	}
	inUse := func(uuid string) bool { return held[uuid] }
	layout := map[string][]inventory.MIGInstance{}
	if a.cfg.MIG != nil {
		placed, err := a.cfg.MIG.Layout()
		if err != nil {
			return err
		}
		sm := func(uuid string) int { return a.smCount[uuid] }
		for gpu, ps := range placed {
			layout[gpu] = migctl.InventoryOf(ps, inUse, sm)
		}
	}
	if a.devices.SetMIG(layout, inUse) {
		a.cfg.Log.Debug("MIG instances changed", "node", a.cfg.NodeName)
	}
	return nil
}
