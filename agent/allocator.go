package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/agent/deviceplugin"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/libinstall"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/migctl"
)

// AllocatorConfig configures an Allocator.
type AllocatorConfig struct {
	Node    string
	Paths   handoff.Paths
	Pods    PodSource
	Kubelet KubeletPods // nil when kubelet's PodResources API is not used
	Store   *checkpoint.Store
	Devices *Devices
	// Enforcer, when set, is told of every allocation and release.
	Enforcer Enforcer
	// MPS, set on an MPS node, gives each container its MPS client
	// variables once Enforcer has registered it; it needs Enforcer.
	MPS MPS
	// MIG, set on a node with GPUs whose MIG layout Tessera manages,
	// creates the instances assignments ask for (binding.MIGInstance with
	// Create) before the container gets them, and destroys them when it
	// ends (migctl.Manager).
	MIG MIGInstances
	// CDI, set when the agent writes its own CDI spec, gets the devices of
	// MIG instances created after the spec was written (cdi.Writer).
	CDI CDIDevices
	// MIGChanged, when set, is called after MIG instances were created or
	// destroyed, or a container holding a MIG instance was recorded or
	// released, so the node's MIG layout is published again. It must not
	// block (the agent only asks its publisher loop; docs/mig.md).
	MIGChanged func()
	Log        *slog.Logger
	// PreferTimeout bounds the API call of GetPreferredAllocation, which
	// kubelet makes while holding its device lock (default 2s).
	PreferTimeout time.Duration
}

// Allocator answers kubelet's device plugin calls (deviceplugin.Handler).
type Allocator struct {
	cfg AllocatorConfig
	mu  sync.Mutex // one allocation decision at a time
	now func() time.Time
}

// NewAllocator checks cfg and returns an Allocator.
func NewAllocator(cfg AllocatorConfig) (*Allocator, error) {
	switch {
	case cfg.Node == "":
		return nil, errors.New("allocator: node name must be set")
	case cfg.Pods == nil || cfg.Store == nil || cfg.Devices == nil:
		return nil, errors.New("allocator: pods, store and devices must be set")
	case cfg.MPS != nil && cfg.Enforcer == nil:
		return nil, errors.New("allocator: MPS mode needs an enforcer (the node arbiter registers each container before it gets its MPS variables)")
	}
	if err := cfg.Paths.Validate(); err != nil {
		return nil, fmt.Errorf("allocator: %w", err)
	}
	if lib := cfg.Paths.HostInterceptLibrary; lib != "" {
		if _, err := resolveLibrary(lib); err != nil {
			return nil, fmt.Errorf("allocator: %w", err)
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PreferTimeout <= 0 {
		cfg.PreferTimeout = 2 * time.Second
	}
	return &Allocator{cfg: cfg, now: time.Now}, nil
}

var _ deviceplugin.Handler = (*Allocator)(nil)

// Allocate finds the container kubelet is allocating deviceIDs to, records
// it, and returns its handoff. See docs/handoff.md.
func (a *Allocator) Allocate(ctx context.Context, deviceIDs []string) (*pluginapi.ContainerAllocateResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := handoff.UnitsOf(deviceIDs); err != nil {
		return nil, err
	}
	kpods, kerr := a.kubeletPods(ctx)
	pods, err := a.cfg.Pods.OnNode(ctx)
	if err != nil {
		return nil, err
	}
	var admitting map[handoff.PodRef]bool
	if kerr == nil {
		admitting = map[handoff.PodRef]bool{}
		for _, kp := range kpods {
			admitting[kp.Ref()] = true
		}
	} else if a.cfg.Kubelet != nil {
		a.cfg.Log.Warn("kubelet PodResources unavailable; matching Allocate against the API server alone", "error", kerr)
	}
	done := a.doneFunc(kpods, kerr == nil)
	choice, err := handoff.Resolve(a.cfg.Node, pods, done, admitting, deviceIDs)
	if err != nil {
		return nil, err
	}
	for i, g := range choice.GPUs {
		if g.MIG != nil && g.MIG.Create {
			// The instance does not exist yet: its parent must be a GPU here.
			if !a.cfg.Devices.IsGPU(g.MIG.GPU) {
				return nil, fmt.Errorf("pod %s container %s: annotation %s: gpus[%d].mig.gpu %q is not a GPU of node %s", choice.Pod.Ref(), choice.Container, binding.AnnotationKey, i, g.MIG.GPU, a.cfg.Node)
			}
			continue
		}
		if !a.cfg.Devices.Known(g.UUID) {
			return nil, fmt.Errorf("pod %s container %s: annotation %s: gpus[%d].uuid %q is not a GPU of node %s", choice.Pod.Ref(), choice.Container, binding.AnnotationKey, i, g.UUID, a.cfg.Node)
		}
	}
	if units, _ := handoff.UnitsOf(deviceIDs); !sameSet(units, choice.GPUs) {
		a.cfg.Log.Info("kubelet chose slots on other GPUs than assigned; the assignment wins", "pod", choice.Pod.Ref(), "container", choice.Container, "devices", deviceIDs)
	}
	if err := a.checkMPS(choice); err != nil {
		return nil, err
	}
	if kerr == nil {
		if err := a.releaseStale(ctx, kpods, pods); err != nil {
			a.cfg.Log.Warn("cannot release the allocations of finished pods before this one", "error", err)
		}
	}
	key := handoff.Key(deviceIDs, choice.Pod.UID, choice.Container)
	if choice.GPUs, err = a.createMIG(key, choice.GPUs); err != nil {
		return nil, fmt.Errorf("pod %s container %s: %w", choice.Pod.Ref(), choice.Container, err)
	}
	paths := a.cfg.Paths
	if paths.HostInterceptLibrary != "" {
		lib, err := resolveLibrary(paths.HostInterceptLibrary)
		if err != nil {
			return nil, fmt.Errorf("pod %s container %s: %w", choice.Pod.Ref(), choice.Container, err)
		}
		paths.HostInterceptLibrary = lib
	}
	if err := os.MkdirAll(a.cfg.Paths.HostStateDir(key), 0o755); err != nil {
		a.releaseMIG(key)
		return nil, fmt.Errorf("create container state folder: %w", err)
	}
	entry := checkpoint.Entry{
		Key: key, DeviceIDs: append([]string(nil), deviceIDs...),
		Namespace: choice.Pod.Namespace, Pod: choice.Pod.Name, PodUID: choice.Pod.UID, Container: choice.Container,
		GPUs: choice.GPUs, Verified: kerr == nil && !choice.Ambiguous, Created: a.now().UTC(),
	}
	if err := a.cfg.Store.Put(entry); err != nil {
		a.releaseMIG(key)
		return nil, fmt.Errorf("record allocation: %w", err)
	}
	refuse := func(err error) (*pluginapi.ContainerAllocateResponse, error) {
		if rerr := a.cfg.Store.Remove(key); rerr != nil {
			a.cfg.Log.Warn("cannot drop the allocation record of a refused container", "key", key, "error", rerr)
		}
		a.releaseMIG(key)
		return nil, fmt.Errorf("pod %s container %s: %w", choice.Pod.Ref(), choice.Container, err)
	}
	if err := a.enforce(ctx, entry); err != nil {
		return refuse(err)
	}
	h := handoff.Build(paths, key, choice.GPUs)
	if a.cfg.MPS != nil {
		if err := a.addMPS(ctx, &h, key); err != nil {
			if uerr := a.cfg.Enforcer.Unregister(ctx, key); uerr != nil {
				a.cfg.Log.Warn("cannot release a refused container's shares", "key", key, "error", uerr)
			}
			return refuse(err)
		}
	}
	a.cfg.Log.Info("allocated", "pod", choice.Pod.Ref(), "container", choice.Container, "key", key, "devices", deviceIDs, "ambiguous", choice.Ambiguous)
	if holdsMIG(choice.GPUs) {
		a.migChanged()
	}
	return deviceplugin.Response(h), nil
}

// MIGInstances creates and destroys the MIG instances of containers
// (migctl.Manager on a node with managed MIG GPUs), by container key.
type MIGInstances interface {
	// Journal keeps the bookings in a file of the state folder and
	// returns an earlier run's.
	Journal(path string) (map[string][]migctl.Want, error)
	// Reconcile adopts the instances of recorded containers and destroys
	// those of ended ones (unless in use), after a restart.
	Reconcile(wanted, ended map[string][]migctl.Want) (migctl.Report, error)
	Acquire(workload string, w migctl.Want) (migctl.Instance, error)
	Release(workload string) error
	Holds(workload string) []migctl.Instance
	Workloads() []string
	// Layout re-reads the managed GPUs' instances from the driver, each
	// with the container key holding it, for publishing.
	Layout() (map[string][]migctl.Placed, error)
}

// CDIDevices adds to and removes from the node's CDI spec the devices of
// MIG instances created for containers (cdi.Writer).
type CDIDevices interface {
	Add(uuids ...string) error
	Remove(uuids ...string) error
}

// createMIG creates, for container key, each MIG instance its shares ask
// the node to create, and returns the shares naming the new instances'
// UUIDs. On a failure nothing created for key is kept.
func (a *Allocator) createMIG(key string, gpus []binding.Share) ([]binding.Share, error) {
	out := slices.Clone(gpus)
	var created []string
	for i, g := range out {
		if g.MIG == nil || !g.MIG.Create {
			continue
		}
		if a.cfg.MIG == nil {
			return nil, fmt.Errorf("annotation %s: gpus[%d].mig asks this node to create a %s instance at slice %d of GPU %s, but the agent manages no MIG GPU", binding.AnnotationKey, i, g.MIGProfile, g.MIG.Start, g.MIG.GPU)
		}
		inst, err := a.cfg.MIG.Acquire(key, migctl.WantOf(g))
		if err != nil {
			a.releaseMIG(key)
			return nil, fmt.Errorf("annotation %s: gpus[%d]: create MIG instance: %w", binding.AnnotationKey, i, err)
		}
		out[i].UUID = inst.UUID
		created = append(created, inst.UUID)
	}
	if a.cfg.CDI != nil && len(created) > 0 {
		if err := a.cfg.CDI.Add(created...); err != nil {
			a.releaseMIG(key)
			return nil, fmt.Errorf("CDI devices of the new MIG instances: %w", err)
		}
	}
	return out, nil
}

// releaseMIG destroys the MIG instances created for container key and
// drops their CDI devices; one still in use stays booked (logged) and is
// retried by a later reconcile (releaseOrphanMIG).
func (a *Allocator) releaseMIG(key string) {
	if a.cfg.MIG == nil {
		return
	}
	before := a.cfg.MIG.Holds(key)
	if len(before) == 0 {
		return
	}
	if err := a.cfg.MIG.Release(key); err != nil {
		a.cfg.Log.Warn("cannot destroy a container's MIG instances", "key", key, "error", err)
	}
	a.migChanged()
	if a.cfg.CDI == nil {
		return
	}
	left := a.cfg.MIG.Holds(key)
	var gone []string
	for _, in := range before {
		if in.UUID != "" && !slices.ContainsFunc(left, func(l migctl.Instance) bool { return l.UUID == in.UUID }) {
			gone = append(gone, in.UUID)
		}
	}
	if len(gone) > 0 {
		if err := a.cfg.CDI.Remove(gone...); err != nil {
			a.cfg.Log.Warn("cannot drop destroyed MIG instances from the CDI spec", "instances", gone, "error", err)
		}
	}
}

// migChanged asks for the node's MIG layout to be published again.
func (a *Allocator) migChanged() {
	if a.cfg.MIGChanged != nil {
		a.cfg.MIGChanged()
	}
}

// holdsMIG reports whether shares hand out a MIG instance.
func holdsMIG(shares []binding.Share) bool {
	return slices.ContainsFunc(shares, func(s binding.Share) bool { return s.MIG != nil || s.MIGProfile != "" })
}

// releaseOrphanMIG retries the release of MIG instances booked to
// containers the checkpoint no longer records: in use at their first
// release, or found after a restart for containers that had ended.
func (a *Allocator) releaseOrphanMIG() {
	if a.cfg.MIG == nil {
		return
	}
	recorded := map[string]bool{}
	for _, e := range a.cfg.Store.Entries() {
		recorded[e.Key] = true
	}
	for _, w := range a.cfg.MIG.Workloads() {
		if !recorded[w] {
			a.releaseMIG(w)
		}
	}
}

// resolveLibrary returns the versioned file the interception library path
// names (libinstall.Resolve).
func resolveLibrary(path string) (string, error) { return libinstall.Resolve(path) }

// checkMPS applies an MPS node's rules to the container Allocate chose,
// before anything is recorded: its assignment names one GPU (the container
// reaches one GPU's MPS control daemon through CUDA_MPS_PIPE_DIRECTORY),
// and its pod sets hostIPC (MPS clients share memory with the MPS server,
// which runs in the host's IPC namespace). The pod spec always comes from
// the API server here, so the agent knows hostIPC and refuses rather than
// hand out a container whose CUDA calls cannot reach MPS.
func (a *Allocator) checkMPS(c handoff.Choice) error {
	if a.cfg.MPS == nil {
		return nil
	}
	if len(c.GPUs) != 1 {
		return fmt.Errorf("pod %s container %s: annotation %s assigns %d GPUs; on MPS node %s (--sharing mps) a container must use exactly one GPU, since CUDA_MPS_PIPE_DIRECTORY names one GPU's MPS daemon",
			c.Pod.Ref(), c.Container, binding.AnnotationKey, len(c.GPUs), a.cfg.Node)
	}
	if !c.Pod.HostIPC {
		return fmt.Errorf("pod %s container %s: spec.hostIPC must be true on MPS node %s (--sharing mps): MPS clients share memory with the node's MPS server through the host IPC namespace",
			c.Pod.Ref(), c.Container, a.cfg.Node)
	}
	return nil
}

// addMPS adds the MPS client variables of a registered allocation and the
// mount of its GPU's pipe folder.
func (a *Allocator) addMPS(ctx context.Context, h *handoff.Handoff, key string) error {
	env, err := a.cfg.MPS.ClientEnv(ctx, key)
	if err != nil {
		return fmt.Errorf("MPS client settings: %w", err)
	}
	if err := h.AddMPS(env); err != nil {
		return fmt.Errorf("MPS client settings: %w", err)
	}
	return nil
}

// Preferred steers kubelet towards slots on the GPUs of the pod it most
// likely admits. It never calls kubelet (kubelet holds its lock) and
// returns nil, letting kubelet choose, when it cannot tell.
func (a *Allocator) Preferred(ctx context.Context, available, mustInclude []string, size int) []string {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.PreferTimeout)
	defer cancel()
	pods, err := a.cfg.Pods.OnNode(ctx)
	if err != nil {
		a.cfg.Log.Debug("no preferred allocation", "error", err)
		return nil
	}
	units, ok := handoff.Guess(a.cfg.Node, pods, a.doneFunc(nil, false), size)
	if !ok {
		return nil
	}
	return handoff.Prefer(available, mustInclude, units, size)
}

// PreStart checks, before each start of a container, that the container
// kubelet records for deviceIDs is the one whose shares were handed out;
// it relabels an entry picked among identical candidates and refuses to
// start a container that would run with another container's shares.
func (a *Allocator) PreStart(ctx context.Context, deviceIDs []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	entry, have := a.cfg.Store.ByDevices(deviceIDs)
	kpods, err := a.kubeletPods(ctx)
	if err != nil {
		a.cfg.Log.Warn("cannot verify container identity: kubelet PodResources unavailable", "devices", deviceIDs, "error", err)
		return nil
	}
	ref, container, found := holder(kpods, deviceIDs)
	if !found {
		if !have {
			a.cfg.Log.Warn("no allocation recorded and kubelet lists no holder", "devices", deviceIDs)
		}
		return nil
	}
	if have && entry.Namespace == ref.Namespace && entry.Pod == ref.Name && entry.Container == container {
		if !entry.Verified {
			entry.Verified = true
			return a.cfg.Store.Put(entry)
		}
		return nil
	}
	pod, ok, err := a.cfg.Pods.Pod(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("pod %s holding devices %v no longer exists", ref, deviceIDs)
	}
	gpus, err := handoff.Shares(a.cfg.Node, pod, container)
	if err != nil {
		return err
	}
	fixed := checkpoint.Entry{
		Key: handoff.Key(deviceIDs, pod.UID, container), DeviceIDs: append([]string(nil), deviceIDs...),
		Namespace: pod.Namespace, Pod: pod.Name, PodUID: pod.UID, Container: container,
		GPUs: gpus, Verified: true, Created: a.now().UTC(),
	}
	if have {
		if !handoff.SameShares(entry.GPUs, gpus) {
			return fmt.Errorf("container %s of pod %s was handed the GPU shares of container %s of pod %s/%s; refusing to start it (delete the pod to allocate again)", container, ref, entry.Container, entry.Namespace, entry.Pod)
		}
		fixed.Key, fixed.Created = entry.Key, entry.Created // the container's environment names the old key
		a.cfg.Log.Info("relabelled allocation picked among identical candidates", "key", entry.Key, "pod", ref, "container", container)
	} else {
		a.cfg.Log.Info("rebuilt lost allocation record from kubelet", "key", fixed.Key, "pod", ref, "container", container)
	}
	if err := a.cfg.Store.Put(fixed); err != nil {
		return err
	}
	if holdsMIG(fixed.GPUs) {
		a.migChanged()
	}
	return a.enforce(ctx, fixed)
}

// Reconcile drops checkpoint entries (and their state folders) of pods
// that have ended: kubelet no longer lists them as active and the API
// server no longer shows them running on the node. Without either report
// it keeps all.
func (a *Allocator) Reconcile(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	kpods, err := a.kubeletPods(ctx)
	if err != nil {
		return err
	}
	pods, err := a.cfg.Pods.OnNode(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	return a.releaseStale(ctx, kpods, pods)
}

// releaseStale drops the allocations of pods that have ended: their
// checkpoint entries, enforcer registrations and state folders. A pod has
// ended when kubelet's report kpods does not list it and the API server's
// pods (every pod bound to the node) do not show it, with the entry's UID,
// as a pod that runs or will run: it is gone, finished or being deleted,
// and that is final.
//
// kubelet's report alone is not enough: a restarted kubelet serves its
// PodResources API before it has re-added the pods it runs (its pod
// manager fills from the API server after start, one pod at a time), and
// a release in that window would drop the shares of running containers,
// which a restarted agent then no longer recovers (found on the real node,
// test/e2enode; test TestKubeletStartingUpKeepsAllocations).
//
// Allocate calls it too, before it registers a new container: the
// scheduler binds a pod to the room a deleted pod left as soon as the
// deletion is visible, and kubelet may call Allocate for it before the
// periodic reconcile has released the deleted pod's shares.
func (a *Allocator) releaseStale(ctx context.Context, kpods []handoff.KubeletPod, pods []handoff.Pod) error {
	active := map[handoff.PodRef]bool{}
	for _, kp := range kpods {
		active[kp.Ref()] = true
	}
	running := map[handoff.PodRef]string{} // pod -> UID, for pods that have not ended
	for _, p := range pods {
		if !p.Terminal {
			running[p.Ref()] = p.UID
		}
	}
	a.releaseOrphanMIG()
	var stale []string
	mig := false
	for _, e := range a.cfg.Store.Entries() {
		ref := handoff.PodRef{Namespace: e.Namespace, Name: e.Pod}
		if active[ref] {
			continue
		}
		if uid, ok := running[ref]; ok && (e.PodUID == "" || e.PodUID == uid) {
			a.cfg.Log.Debug("kubelet does not list a pod the API server shows running; keeping its allocation (kubelet may be starting)", "pod", ref, "key", e.Key)
			continue
		}
		stale = append(stale, e.Key)
		mig = mig || holdsMIG(e.GPUs)
	}
	if len(stale) == 0 {
		return nil
	}
	if err := a.cfg.Store.Remove(stale...); err != nil {
		return err
	}
	if a.cfg.Enforcer != nil {
		for _, k := range stale {
			if err := a.cfg.Enforcer.Unregister(ctx, k); err != nil {
				a.cfg.Log.Warn("cannot release a finished container's shares", "key", k, "error", err)
			}
		}
	}
	for _, k := range stale {
		a.releaseMIG(k)
		if err := os.RemoveAll(a.cfg.Paths.HostStateDir(k)); err != nil {
			a.cfg.Log.Warn("cannot remove container state folder", "key", k, "error", err)
		}
	}
	if mig {
		a.migChanged()
	}
	a.cfg.Log.Info("released allocations of finished pods", "count", len(stale))
	return nil
}

func (a *Allocator) kubeletPods(ctx context.Context) ([]handoff.KubeletPod, error) {
	if a.cfg.Kubelet == nil {
		return nil, errors.New("kubelet PodResources API not configured")
	}
	return a.cfg.Kubelet.List(ctx)
}

// doneFunc reports which containers already hold devices: kubelet's own
// record when available, the checkpoint for containers kubelet does not
// list (regular init containers) or when kubelet's report is unavailable.
func (a *Allocator) doneFunc(kpods []handoff.KubeletPod, useKubelet bool) func(handoff.Allocated) bool {
	listed := map[handoff.PodRef]map[string][]string{}
	if useKubelet {
		for _, kp := range kpods {
			listed[kp.Ref()] = kp.Devices
		}
	}
	entries := a.cfg.Store.Entries()
	return func(c handoff.Allocated) bool {
		if devs, ok := listed[c.Pod][c.Container]; ok {
			return len(devs) > 0
		}
		for _, e := range entries {
			if e.PodUID == c.PodUID && e.Container == c.Container {
				return true
			}
		}
		return false
	}
}

// holder finds the container kubelet records as holding exactly deviceIDs.
func holder(kpods []handoff.KubeletPod, deviceIDs []string) (handoff.PodRef, string, bool) {
	for _, kp := range kpods {
		for c, devs := range kp.Devices {
			if handoff.SameDevices(devs, deviceIDs) {
				return kp.Ref(), c, true
			}
		}
	}
	return handoff.PodRef{}, "", false
}

func sameSet(units []string, gpus []binding.Share) bool {
	if len(units) != len(gpus) {
		return false
	}
	in := map[string]bool{}
	for _, u := range units {
		in[u] = true
	}
	for _, g := range gpus {
		if !in[g.UUID] {
			return false
		}
	}
	return true
}

// enforce registers an allocation with the enforcer (if any). GPUs go in
// index order: the container's CUDA device ordinals.
func (a *Allocator) enforce(ctx context.Context, e checkpoint.Entry) error {
	if a.cfg.Enforcer == nil {
		return nil
	}
	gpus := append([]binding.Share(nil), e.GPUs...)
	sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	if err := a.cfg.Enforcer.Register(ctx, e.Key, a.cfg.Paths.HostStateDir(e.Key), gpus); err != nil {
		return fmt.Errorf("enforce GPU shares: %w", err)
	}
	return nil
}

// Reenforce registers every recorded allocation again (after a restart).
func (a *Allocator) Reenforce(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.cfg.Store.Entries() {
		if err := a.enforce(ctx, e); err != nil {
			a.cfg.Log.Warn("cannot re-enforce a recorded allocation", "key", e.Key, "error", err)
		}
	}
}
