package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/agent/deviceplugin"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/inventory"
)

// CheckpointFile is the checkpoint's name in the state folder.
const CheckpointFile = "allocations.json"

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
	devices, err := NewDevices(cfg.Node, cfg.SlotsPerGPU)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
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
		path, err := cdi.Generate(lib, cfg.Node, cdi.Options{Dir: cfg.Paths.CDISpecDir, BaseSpec: cfg.Paths.CDIBaseSpec, HostRoot: cfg.HostRoot})
		if err != nil {
			return nil, fmt.Errorf("agent: CDI spec: %w", err)
		}
		cfg.Paths.CDI, cfg.Paths.CDIKind = true, cdi.Kind
		cfg.Log.Info("wrote CDI spec", "path", path, "kind", cdi.Kind)
	}
	store, err := checkpoint.Open(filepath.Join(cfg.StateDir, CheckpointFile), cfg.NodeName)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	alloc, err := NewAllocator(AllocatorConfig{
		Node: cfg.NodeName, Paths: cfg.Paths, Pods: cfg.Pods, Kubelet: cfg.Kubelet,
		Store: store, Devices: devices, Enforcer: cfg.Enforcer, MPS: cfg.MPS, MIG: cfg.MIG, Log: cfg.Log,
	})
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
	return &Agent{cfg: cfg, devices: devices, store: store, alloc: alloc, plugin: plugin, publish: make(chan struct{}, 1)}, nil
}

// Registered receives after each registration with kubelet.
func (a *Agent) Registered() <-chan struct{} { return a.plugin.Registered() }

// Reconcile releases the allocations of pods that have ended (kubelet no
// longer lists them and the API server no longer shows them running) now,
// rather than at the next ReconcileInterval.
func (a *Agent) Reconcile(ctx context.Context) error { return a.alloc.Reconcile(ctx) }

// Allocations returns the recorded container allocations.
func (a *Agent) Allocations() []checkpoint.Entry { return a.store.Entries() }

// Inventory returns the node's inventory with current health.
func (a *Agent) Inventory() inventory.Node { return a.devices.Node() }

// SetHealth records a GPU's health; kubelet and the cluster hear of changes.
func (a *Agent) SetHealth(gpuUUID string, h inventory.Health, reason string) {
	if !a.devices.SetHealth(gpuUUID, h, reason) {
		return
	}
	a.cfg.Log.Warn("GPU health changed", "gpu", gpuUUID, "health", h, "reason", reason)
	a.plugin.SetDevices(deviceplugin.Devices(a.devices.Slots()))
	select {
	case a.publish <- struct{}{}:
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
		a.publish <- struct{}{}
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

// publishLoop publishes on start and on every health change, retrying
// failures with backoff up to a minute.
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
		if err := a.cfg.Publisher.Publish(ctx, a.devices.Node()); err != nil {
			a.cfg.Log.Warn("cannot publish inventory; retrying", "error", err, "in", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, time.Minute)
			continue
		}
		retry, backoff = nil, time.Second
	}
}
