package setup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/checkpoint"
	agentdra "github.com/tessera-gpu/tessera/agent/dra"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/metrics"
	"github.com/tessera-gpu/tessera/arbiter"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/discovery/nvmlgpu"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/gpunode"
)

// Options are the agent's settings, already validated by the caller.
type Options struct {
	NodeName           string
	Source             string // discovery source string
	PluginDir          string // kubelet's device-plugins folder
	PodResourcesSocket string // "" disables kubelet's PodResources API
	StateDir           string
	Paths              handoff.Paths
	SlotsPerGPU        int
	Sharing            string // a gpunode sharing mode; gpunode.SharingMPS runs the arbiter in MPS mode
	// MPSRoot (absolute) holds each GPU's MPS pipe and log folders, and
	// MPSControl is nvidia-cuda-mps-control ("" = looked up on PATH);
	// both are used only when Sharing is gpunode.SharingMPS.
	MPSRoot, MPSControl string
	MetricsAddr         string // "" disables the metrics server
	// UsePeriod is how often the node's GPU use is published as its
	// GPUUse object (a large change sooner; gpuuse.Pacer), in
	// [gpuuse.MinPublishPeriod, gpuuse.MaxPublishPeriod]; 0 publishes none.
	UsePeriod time.Duration
	// Idle is the idle-holder rule over the node arbiter's use windows
	// (IdleRule.WithDefaults when zero); LendIdle lends an idle holder's
	// compute guarantee to the other containers on its GPU.
	Idle       gpuuse.IdleRule
	LendIdle   bool
	Kubeconfig string // "" = in-cluster configuration
	InstallCRD bool
	// MIGManaged names the GPUs whose MIG layout the operator hands to
	// Tessera: "" (none), "all" (every GPU in MIG mode) or GPU UUIDs,
	// comma-separated (--mig-managed; discovery.MarkMIGManaged).
	MIGManaged string
	// DRAPublish also publishes the GPUs as DRA ResourceSlices (driver
	// gpu.tessera.io; --dra-publish, docs/dra.md).
	DRAPublish bool
	// DRA serves the DRA kubelet plugin, which prepares the claims
	// allocated on this node's GPUs (--dra; the caller sets DRAPublish
	// too). DRAPluginDir holds its socket, DRARegistryDir is kubelet's
	// plugin registration folder, DRACDIDir the folder of the claims' CDI
	// specs (all absolute).
	DRA                                     bool
	DRAPluginDir, DRARegistryDir, DRACDIDir string

	Catalog *catalog.Catalog
	Log     *slog.Logger
}

// Run discovers the node's GPUs and runs the agent until ctx ends.
func Run(ctx context.Context, o Options) error {
	src, err := discovery.Open(o.Source, o.Catalog)
	if err != nil {
		return err
	}
	nodes, err := src.Discover(ctx)
	if err != nil {
		return fmt.Errorf("discover GPUs (%s): %w", o.Source, err)
	}
	if len(nodes) != 1 {
		return fmt.Errorf("source %s describes %d nodes; the agent needs exactly one (its own)", o.Source, len(nodes))
	}
	node := nodes[0]
	measured := node.Source == "nvml"
	if !measured {
		o.Log.Warn("using simulated GPUs; GPU metrics carry source=\"simulated\"", "source", src.Name())
	}
	mig, closeMIG, err := migManager(&node, measured, o)
	if err != nil {
		return err
	}
	defer closeMIG()
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	acfg := agent.Config{
		NodeName: o.NodeName, Node: node, SlotsPerGPU: o.SlotsPerGPU, ResourceName: kube.ResourceGPU,
		PluginDir: o.PluginDir, StateDir: o.StateDir, Paths: o.Paths,
		Pods:      kube.Pods{Client: core, Node: o.NodeName},
		Publisher: &kube.Publisher{Core: core, Dynamic: dyn, SlotsPerGPU: o.SlotsPerGPU, Sharing: o.Sharing, Oversubscribe: o.Paths.Oversubscribe, InstallCRD: o.InstallCRD, Log: o.Log},
		Log:       o.Log,
	}
	if o.DRAPublish {
		acfg.Publisher = kube.Publishers{acfg.Publisher, &kube.SlicePublisher{Client: core, Sharing: o.Sharing, Catalog: o.Catalog, Log: o.Log}}
	}
	if mig != nil {
		acfg.MIG = mig
		if o.DRA {
			// The instances prepared claims hold are adopted, not
			// destroyed as ended, when the agent reconciles MIG.
			if acfg.MIGWanted, err = agentdra.RecordedMIG(o.StateDir, o.NodeName); err != nil {
				return err
			}
		}
	}
	if o.PodResourcesSocket != "" {
		pr, err := kube.NewPodResources(o.PodResourcesSocket, kube.ResourceGPU)
		if err != nil {
			return err
		}
		defer pr.Close()
		acfg.Kubelet = pr
	}
	if measured {
		acfg.Health = nvmlHealth(nvmlgpu.New(o.Catalog))
	}
	// The node arbiter enforces every allocation's compute shares; memory
	// working sets past a GPU's memory switch it to exclusive time slices.
	capacity := map[string]uint64{}
	for _, g := range node.GPUs {
		capacity[g.UUID] = uint64(g.MemoryMiB) << 20
	}
	// On real GPUs, NVML's per-process utilisation turns launch tokens
	// into GPU time; processes map to allocations through the agent's
	// checkpoint, which exists once the agent does.
	var a *agent.Agent
	var shares *nodeShares // a's shares and, with --dra, its prepared claims'
	var meter arbiter.Meter
	var sim *SimMeter
	mpsMode := o.Sharing == gpunode.SharingMPS
	if !measured && !mpsMode { // simulated GPUs: use from each container's declared load, labelled simulated
		sim = NewSimMeter(func() []checkpoint.Entry {
			if shares == nil {
				return nil
			}
			return shares.Allocations()
		}, kube.Pods{Client: core, Node: o.NodeName}.EnvOf, time.Now, o.Log)
		meter = sim
	}
	if measured && !mpsMode { // in MPS mode MPS caps compute; the arbiter measures nothing
		m, err := nvmlMeter(func() []checkpoint.Entry {
			if a == nil {
				return nil
			}
			return a.Allocations()
		}, o.Log)
		if err != nil {
			o.Log.Warn("no GPU utilisation meter: compute limits cap launch rate, not GPU time", "err", err)
		} else {
			defer m.Close()
			meter = m
		}
	}
	arbCfg := arbiter.Config{Capacity: capacity, Meter: meter, Idle: o.Idle, KeepIdleGuarantee: !o.LendIdle, Logger: o.Log}
	if mpsMode {
		arbCfg.Mode = arbiter.ModeMPS
		arbCfg.MPS = mps.Config{Root: o.MPSRoot, Binary: o.MPSControl, GPUs: node.UnitUUIDs()} // a daemon per unit the device plugin hands out (MPS runs on top of MIG)
	}
	arb, err := arbiter.New(arbCfg)
	if err != nil {
		return fmt.Errorf("node arbiter: %w", err)
	}
	acfg.Enforcer = arbiter.Enforcer{Arbiter: arb}
	if mpsMode {
		acfg.MPS = arb
		o.Log.Info("MPS mode: one MPS control daemon per GPU; containers need hostIPC", "root", o.MPSRoot, "control", arbCfg.MPS.Binary, "units", len(arbCfg.MPS.GPUs))
	}
	a, err = agent.New(acfg)
	if err != nil {
		return err
	}
	shares = &nodeShares{Agent: a}
	var stats metrics.GPUStats = metrics.Simulated{Node: shares}
	if measured {
		stats = metrics.NewNVML()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveErr := make(chan error, 1)
	if o.MetricsAddr != "" {
		stop, err := serveMetrics(ctx, o.MetricsAddr, metrics.NewCollector(shares, stats, ArbiterUsage{arb}, o.Log), serveErr)
		if err != nil {
			return err
		}
		defer stop()
		o.Log.Info("serving metrics", "addr", o.MetricsAddr)
	}
	if sim != nil {
		go runSimMeter(ctx, sim)
	}
	if o.UsePeriod > 0 {
		src := UseSource{Node: shares, Arbiter: arb, Sim: sim, MPS: mpsMode, Intercept: o.Paths.HostInterceptLibrary != "", Log: o.Log}
		go useLoop(ctx, o, src, core, dyn).Run(ctx)
	}
	go func() {
		if err := arb.Run(ctx); err != nil {
			o.Log.Error("node arbiter stopped", "err", err)
		}
	}()
	defer func() {
		if err := arb.Close(context.WithoutCancel(ctx)); err != nil {
			o.Log.Warn("closing the node arbiter", "err", err)
		}
	}()
	if o.DRA {
		plugin, err := draPlugin(ctx, o, a, measured, acfg)
		if err != nil {
			return err
		}
		shares.dra.Store(plugin)
		go func() {
			if err := plugin.Serve(ctx, agentdra.ServeOptions{Client: core, NodeName: o.NodeName, PluginDir: o.DRAPluginDir, RegistryDir: o.DRARegistryDir}); err != nil {
				select {
				case serveErr <- err:
				default: // the agent is stopping for another server's error
				}
			}
		}()
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	select {
	case err := <-runErr:
		return err
	case err := <-serveErr:
		cancel()
		<-runErr
		return err
	}
}

// draPlugin builds the DRA kubelet plugin on the agent's inventory, paths
// and arbiter; it seats the claims prepared before a restart.
func draPlugin(ctx context.Context, o Options, a *agent.Agent, measured bool, acfg agent.Config) (*agentdra.Plugin, error) {
	paths := o.Paths
	if paths.CDISpecDir != "" { // the agent writes its own CDI spec (agent.New)
		paths.CDI, paths.CDIKind = true, cdi.Kind
	}
	cfg := agentdra.Config{
		Node: a.Inventory, Paths: paths, Enforcer: acfg.Enforcer, MPS: acfg.MPS,
		StateDir: o.StateDir, CDIDir: o.DRACDIDir, Catalog: o.Catalog, Log: o.Log,
	}
	if acfg.MIG != nil {
		cfg.MIG, cfg.MIGChanged = acfg.MIG, a.MIGChanged
	}
	if measured {
		lib := nvml.New()
		cfg.Locate = func(uuids []string) ([]cdi.Unit, error) { return cdi.Locate(lib, uuids) }
	} else {
		o.Log.Warn("simulated GPUs: the CDI specs of DRA claims name no device nodes")
	}
	p, err := agentdra.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: not set and not running in a pod (%w)", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func nvmlHealth(src *nvmlgpu.Source) agent.HealthWatcher {
	return func(ctx context.Context, report func(string, inventory.Health, string)) error {
		return src.WatchHealth(ctx, func(ev nvmlgpu.HealthEvent) { report(ev.UUID, ev.Health, ev.Reason) })
	}
}

func serveMetrics(ctx context.Context, addr string, c *metrics.Collector, errc chan<- error) (func(), error) {
	h, err := metrics.Handler(c)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("metrics server: %w", err)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}, nil
}

// nodeShares is what the metrics read of the node: the agent's inventory,
// and every share handed out, to the device plugin's containers and, once
// the DRA kubelet plugin runs, to its prepared claims.
type nodeShares struct {
	*agent.Agent
	dra atomic.Pointer[agentdra.Plugin]
}

// Allocations implements metrics.Node.
func (n *nodeShares) Allocations() []checkpoint.Entry {
	out := n.Agent.Allocations()
	if p := n.dra.Load(); p != nil {
		for _, c := range p.Prepared() {
			out = append(out, c.Allocation())
		}
	}
	return out
}
