package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-gpu/tessera/agent/cdi"
	agentdra "github.com/tessera-gpu/tessera/agent/dra"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/kube"
	"github.com/tessera-gpu/tessera/agent/setup"
	"github.com/tessera-gpu/tessera/arbiter/mps"
	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/quantity"
)

// agentFlags are the flags of `tessera agent`.
type agentFlags struct {
	nodeName, source, pluginDir, podResources, stateDir, runDir     string
	arbiterDir, interceptLib, sharing, metricsAddr, kubeconfig      string
	computeFail, cdiSpecDir, cdiBaseSpec, mpsRoot, mpsControl       string
	migManaged, draPluginDir, draRegistryDir, idleBelow             string
	slotsPerGPU                                                     int
	usePeriod, idleAfter                                            time.Duration
	cdi, cdiSpec, oversubscribe, installCRD, standalone, draPublish bool
	dra, lendIdle                                                   bool
	mpsRootSet                                                      bool // --mps-root given explicitly
	draDirsSet                                                      bool // --dra-plugin-dir or --dra-registry-dir given explicitly
}

func newAgentCommand(a *app) *cobra.Command {
	f := agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: GPU inventory, kubelet device plugin, handoff and metrics",
		Long: `Run the Tessera node agent on a GPU node (as a DaemonSet). It publishes the
node's GPUs (a GPUNode object and the tessera.io/gpu-memory extended resource),
serves kubelet the tessera.io/gpu device plugin, hands each container the GPU
shares the scheduler recorded in its tessera.io/assignment annotation, and
serves Prometheus metrics. With --dra it also serves kubelet the DRA plugin of
driver gpu.tessera.io, which prepares ResourceClaims allocated on the node's
GPUs, and publishes them as ResourceSlices. See docs/handoff.md, docs/dra.md
and docs/metrics.md.`,
		Example: `  tessera agent --node-name "$NODE_NAME"
  tessera agent --standalone --source local
  tessera agent --node-name gpu-0 --source sim:8xH200 --kubeconfig ~/.kube/config --state-dir /tmp/tessera
  tessera agent --node-name "$NODE_NAME" --sharing mps --mps-root /run/tessera/mps
  tessera agent --node-name "$NODE_NAME" --mig-managed all
  tessera agent --node-name "$NODE_NAME" --dra`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.standalone {
				if _, err := discovery.Open(f.source, a.catalog); err != nil {
					return fmt.Errorf("--source: %w", err)
				}
				return setup.Standalone(cmd.Context(), setup.Options{Source: f.source, Catalog: a.catalog, Log: a.log}, a.stdout)
			}
			f.mpsRootSet = cmd.Flags().Changed("mps-root")
			f.draDirsSet = cmd.Flags().Changed("dra-plugin-dir") || cmd.Flags().Changed("dra-registry-dir")
			opts, err := f.options(a)
			if err != nil {
				return err
			}
			return setup.Run(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's Kubernetes name (default $NODE_NAME)")
	fl.StringVar(&f.source, "source", "auto", discovery.SourceHelp)
	fl.StringVar(&f.pluginDir, "kubelet-socket-dir", "/var/lib/kubelet/device-plugins", "kubelet's device-plugins folder (holds kubelet.sock)")
	fl.StringVar(&f.podResources, "pod-resources-socket", kube.DefaultPodResourcesSocket, `kubelet's PodResources socket; "" to match pods through the API server alone`)
	fl.StringVar(&f.stateDir, "state-dir", "/var/lib/tessera/agent", "folder of the allocation checkpoint (must survive agent restarts)")
	fl.StringVar(&f.runDir, "run-dir", "/run/tessera/containers", "host folder (tmpfs) of the per-container enforcement state mounted at "+handoff.ContainerStateDir)
	fl.StringVar(&f.arbiterDir, "arbiter-dir", "", "host folder of the node arbiter's socket; empty: no compute gating")
	fl.StringVar(&f.interceptLib, "intercept-library", "", "host path of libtessera-intercept.so to preload; empty: no in-container enforcement")
	fl.StringVar(&f.computeFail, "compute-fail", "", "TESSERA_COMPUTE_FAIL for containers: open or closed (empty: the library's default)")
	fl.BoolVar(&f.oversubscribe, "oversubscribe", false, "set TESSERA_OVERSUBSCRIBE=1 (device memory may spill to host memory) and publish it in the GPUNode (status.memoryOversubscription): pods asking tessera.io/oversubscribe or nvshare.com/gpu are placed only on such nodes")
	fl.BoolVar(&f.cdi, "cdi", false, "hand GPUs to the runtime as CDI devices (nvidia.com/gpu=UUID) instead of NVIDIA_VISIBLE_DEVICES")
	fl.BoolVar(&f.cdiSpec, "cdi-spec", false, "write Tessera's own CDI spec (kind "+cdi.Kind+") for this node's GPUs and MIG instances into --cdi-spec-dir and hand containers "+cdi.Kind+"=UUID (implies --cdi; needs NVML)")
	fl.StringVar(&f.cdiSpecDir, "cdi-spec-dir", cdi.DefaultDir, "folder the runtime reads CDI specs from (with --cdi-spec or --dra)")
	fl.StringVar(&f.cdiBaseSpec, "cdi-base-spec", "", "CDI spec from nvidia-ctk cdi generate whose driver libraries and hooks --cdi-spec copies (e.g. /var/run/cdi/nvidia.yaml)")
	fl.IntVar(&f.slotsPerGPU, "slots-per-gpu", 16, "containers that may share one GPU (tessera.io/gpu devices per GPU), 1 to 1000")
	fl.StringVar(&f.sharing, "sharing", gpunode.SharingShared, "sharing mode of non-MIG GPUs: shared, exclusive, or mps (NVIDIA MPS caps each container's compute; one GPU per container, pods need hostIPC; see docs/handoff.md)")
	fl.StringVar(&f.mpsRoot, "mps-root", defaultMPSRoot, "host folder of each GPU's MPS pipe and log folders (with --sharing mps); containers mount the pipe folder at the same path, so the agent must see it at its host path")
	fl.StringVar(&f.mpsControl, "mps-control", "", "nvidia-cuda-mps-control program (with --sharing mps); empty: looked up on PATH")
	fl.StringVar(&f.migManaged, "mig-managed", "", `GPUs whose MIG layout the operator hands to Tessera: "all" (every GPU in MIG mode) or GPU UUIDs, comma-separated; the agent creates the MIG instance the scheduler chose when a container starts and destroys it when the pod ends. The GPUs must already be in MIG mode: Tessera never switches it (docs/mig.md)`)
	fl.BoolVar(&f.draPublish, "dra-publish", false, "also publish this node's GPUs as Dynamic Resource Allocation devices (ResourceSlices of driver gpu.tessera.io; needs RBAC on resourceslices). Without --dra no claim on them can be prepared on this node, so leave it off where pods use DRA claims (docs/dra.md)")
	fl.BoolVar(&f.dra, "dra", false, "serve the Dynamic Resource Allocation kubelet plugin of driver gpu.tessera.io: prepare the ResourceClaims allocated on this node's GPUs (an arbiter seat with the claim's guarantee and burst limit, a CDI spec per claim in --cdi-spec-dir) and release them; implies --dra-publish (needs RBAC: get on resourceclaims, and what --dra-publish needs; docs/dra.md)")
	fl.StringVar(&f.draPluginDir, "dra-plugin-dir", agentdra.DefaultPluginDir, "folder of the DRA plugin's socket (with --dra); kubelet must see it at the same path")
	fl.StringVar(&f.draRegistryDir, "dra-registry-dir", agentdra.DefaultRegistryDir, "kubelet's plugin registration folder (with --dra)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", ":9400", `address of the /metrics server; "" disables it`)
	fl.DurationVar(&f.usePeriod, "use-period", gpuuse.DefaultPublishPeriod, fmt.Sprintf("how often the node's GPU use (each pod's booking beside its measured or simulated use, idle marks) is published as its GPUUse object, %v to %v; a large change goes out sooner, never within %v of the last; 0 publishes none (needs RBAC on gpuuses)", gpuuse.MinPublishPeriod, gpuuse.MaxPublishPeriod, gpuuse.DefaultPublishGap))
	fl.StringVar(&f.idleBelow, "idle-below", quantity.FormatShare(gpuuse.DefaultIdleBelowMilli), "a pod whose measured (or, on simulated GPUs, simulated) use of a GPU stays below this share for --idle-after is marked an idle holder (in its GPUUse and metrics)")
	fl.DurationVar(&f.idleAfter, "idle-after", gpuuse.DefaultIdleAfter, "how long a pod's use must stay below --idle-below before it is marked an idle holder")
	fl.BoolVar(&f.lendIdle, "lend-idle", true, "lend an idle holder's compute guarantee to the other containers on its GPU (up to their burst limits) until its use rises again; it keeps running, its memory and a floor of twice --idle-below (--sharing shared only)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; empty: the in-cluster service account")
	fl.BoolVar(&f.standalone, "standalone", false, "without Kubernetes: print the discovered inventory as JSON and stream health events (real GPUs) until interrupted")
	fl.BoolVar(&f.installCRD, "install-crd", true, "create or update the GPUNode and GPUUse CRDs on start (needs RBAC on customresourcedefinitions)")
	return cmd
}

// options validates the flags; errors name the flag and the allowed values.
func (f agentFlags) options(a *app) (setup.Options, error) {
	if f.nodeName == "" {
		return setup.Options{}, fmt.Errorf("--node-name: must be set (or $NODE_NAME, e.g. from the downward API spec.nodeName)")
	}
	for _, p := range []struct{ flag, v string }{
		{"--kubelet-socket-dir", f.pluginDir}, {"--state-dir", f.stateDir}, {"--run-dir", f.runDir},
		{"--pod-resources-socket", f.podResources}, {"--arbiter-dir", f.arbiterDir}, {"--intercept-library", f.interceptLib},
		{"--cdi-spec-dir", f.cdiSpecDir}, {"--cdi-base-spec", f.cdiBaseSpec},
		{"--dra-plugin-dir", f.draPluginDir}, {"--dra-registry-dir", f.draRegistryDir},
	} {
		if p.v != "" && !filepath.IsAbs(p.v) {
			return setup.Options{}, fmt.Errorf("%s: must be an absolute path, got %q", p.flag, p.v)
		}
	}
	if f.pluginDir == "" || f.stateDir == "" || f.runDir == "" {
		return setup.Options{}, fmt.Errorf("--kubelet-socket-dir, --state-dir and --run-dir: must not be empty")
	}
	if f.slotsPerGPU < 1 || f.slotsPerGPU > handoff.MaxSlotsPerUnit {
		return setup.Options{}, fmt.Errorf("--slots-per-gpu: must be in [1, %d], got %d", handoff.MaxSlotsPerUnit, f.slotsPerGPU)
	}
	if f.sharing != gpunode.SharingShared && f.sharing != gpunode.SharingExclusive && f.sharing != gpunode.SharingMPS {
		return setup.Options{}, fmt.Errorf("--sharing: must be shared, exclusive or mps (MIG GPUs are reported as mig), got %q", f.sharing)
	}
	mpsControl, err := f.mpsOptions()
	if err != nil {
		return setup.Options{}, err
	}
	if f.computeFail != "" && f.computeFail != "open" && f.computeFail != "closed" {
		return setup.Options{}, fmt.Errorf("--compute-fail: must be open or closed, got %q", f.computeFail)
	}
	if _, err := discovery.Open(f.source, a.catalog); err != nil {
		return setup.Options{}, fmt.Errorf("--source: %w", err)
	}
	var specDir, baseSpec string
	if f.cdiSpec {
		if f.cdiSpecDir == "" {
			return setup.Options{}, fmt.Errorf("--cdi-spec-dir: must be set with --cdi-spec")
		}
		specDir, baseSpec = f.cdiSpecDir, f.cdiBaseSpec
	} else if f.cdiBaseSpec != "" {
		return setup.Options{}, fmt.Errorf("--cdi-base-spec: only applies with --cdi-spec")
	}
	if err := f.draOptions(); err != nil {
		return setup.Options{}, err
	}
	if f.usePeriod != 0 {
		if err := gpuuse.ValidatePublishPeriod("--use-period", f.usePeriod); err != nil {
			return setup.Options{}, fmt.Errorf("%w (0 publishes none)", err)
		}
	}
	idle, err := idleRule(f.idleBelow, f.idleAfter)
	if err != nil {
		return setup.Options{}, err
	}
	return setup.Options{
		DRA: f.dra, DRAPluginDir: f.draPluginDir, DRARegistryDir: f.draRegistryDir, DRACDIDir: f.cdiSpecDir,
		NodeName: f.nodeName, Source: f.source, PluginDir: f.pluginDir, PodResourcesSocket: f.podResources,
		StateDir: f.stateDir, SlotsPerGPU: f.slotsPerGPU, Sharing: f.sharing, MPSRoot: f.mpsRoot, MPSControl: mpsControl, MetricsAddr: f.metricsAddr, UsePeriod: f.usePeriod,
		Idle: idle, LendIdle: f.lendIdle,
		Kubeconfig: f.kubeconfig, InstallCRD: f.installCRD, MIGManaged: f.migManaged, DRAPublish: f.draPublish || f.dra, Catalog: a.catalog, Log: a.log,
		Paths: handoff.Paths{
			HostStateRoot: f.runDir, HostArbiterDir: f.arbiterDir, HostInterceptLibrary: f.interceptLib,
			CDI: f.cdi, CDISpecDir: specDir, CDIBaseSpec: baseSpec, ComputeFail: f.computeFail, Oversubscribe: f.oversubscribe,
		},
	}, nil
}

// draOptions checks the DRA plugin's flags against --dra.
func (f agentFlags) draOptions() error {
	if !f.dra {
		if f.draDirsSet {
			return fmt.Errorf("--dra-plugin-dir, --dra-registry-dir: only apply with --dra")
		}
		return nil
	}
	switch {
	case f.draPluginDir == "":
		return fmt.Errorf("--dra-plugin-dir: must be set with --dra")
	case f.draRegistryDir == "":
		return fmt.Errorf("--dra-registry-dir: must be set with --dra")
	case f.cdiSpecDir == "":
		return fmt.Errorf("--cdi-spec-dir: must be set with --dra (the claims' CDI specs go there)")
	}
	return nil
}

// defaultMPSRoot is --mps-root's default: short, since MPS's socket paths
// under <root>/<GPU UUID>/pipe must fit a Unix socket path.
const defaultMPSRoot = "/run/tessera/mps"

// mpsOptions checks --mps-root and --mps-control against --sharing and
// returns the control program's path ("" unless --sharing mps).
func (f agentFlags) mpsOptions() (string, error) {
	if f.sharing != gpunode.SharingMPS {
		switch {
		case f.mpsRootSet:
			return "", fmt.Errorf("--mps-root: only applies with --sharing mps, got --sharing %s", f.sharing)
		case f.mpsControl != "":
			return "", fmt.Errorf("--mps-control: only applies with --sharing mps, got --sharing %s", f.sharing)
		}
		return "", nil
	}
	if !filepath.IsAbs(f.mpsRoot) {
		return "", fmt.Errorf("--mps-root: must be an absolute path, got %q", f.mpsRoot)
	}
	name := f.mpsControl
	if name == "" {
		name = mps.DefaultBinary
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("--mps-control: %s is not an executable program (it ships with the NVIDIA driver; the NVIDIA container toolkit mounts it into containers with the compute capability): %w", name, err)
	}
	return path, nil
}
