package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/clusterview"
	"github.com/tessera-gpu/tessera/kube/crdwatch"
	"github.com/tessera-gpu/tessera/kube/draclaims"
	"github.com/tessera-gpu/tessera/kube/gpunode"
	"github.com/tessera-gpu/tessera/kube/kubefilter"
	"github.com/tessera-gpu/tessera/kube/membership"
	"github.com/tessera-gpu/tessera/kube/nodeinventory"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/kube/podbind"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/podstatus"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/schedmetrics"
	"github.com/tessera-gpu/tessera/placement"
)

// DefaultName is the schedulerName pods set to opt in.
const DefaultName = "tessera"

// Scheduler places pods that name it.
type Scheduler struct {
	cfg    Config
	policy placement.Policy
	// podPolicies are the policies pods named by annotation, built on first
	// use (only the scheduling cycle reads and writes it).
	podPolicies map[string]placement.Policy
	nodes       corelisters.NodeLister
	pods        corelisters.PodLister
	// dra resolves, allocates, assumes and writes the pods' DRA claims
	// (package kube/draclaims); Run gives it the claims' informers where
	// the API server serves resource.k8s.io/v1.
	dra *draclaims.Allocator
	// filter runs kube-scheduler's own hard-constraint plugins for the pods
	// they concern (package kube/kubefilter; nil outside Run: none run).
	filter  *kubefilter.Filter
	wake    chan struct{}
	events  *podstatus.Sink
	metrics *schedmetrics.Metrics
	binder  *podbind.Pool // nil outside Run: bindings run inline
	// core is the scheduling core (package dispatch): the pending pods'
	// order, backoff, gangs, reservation and preemptor waits, bindings in
	// flight. Only the scheduling loop calls it; reports reach it through
	// inbox. nextRetry is when its first backoff ends.
	core      *dispatch.Core
	inbox     inbox
	nextRetry time.Time
	// lastOrder is the pending pods' order the last cycle took (the view's).
	lastOrder []string
	assumed   map[string]*corev1.Pod

	// queueObjects lists Queue objects (none without a dynamic client).
	queueObjects func() []*unstructured.Unstructured
	// useObjects lists the nodes' GPUUse objects for the cluster view
	// (none without a dynamic client); set by Run, read by View under
	// snapMu.
	useObjects func() ([]*unstructured.Unstructured, error)
	// members reads a pod's gang and queue from the pod, its Job and its
	// PodGroup (kube/membership): Jobs once Run watches them, PodGroups
	// with a dynamic client.
	members membership.Reader

	// snap is the cluster as booked, kept from one cycle to the next
	// (snapshot.go; nil: built anew at the next cycle); snapMu is held
	// while a cycle changes it, and by View while it reads it.
	snap   *snapshot
	snapMu sync.Mutex
	// changedNodes are the nodes whose object or GPUNode changed since the
	// last cycle took them (informer events mark them).
	changedNodes marks
	// changedPods are the pods added, changed or deleted since the last
	// cycle took them; pending are the pods waiting for this scheduler
	// (pods.go), and assumed those of them it bound, not yet seen bound by
	// the informer (booked meanwhile), by namespace/name. Scheduling loop
	// only.
	changedPods marks
	pending     map[string]*corev1.Pod

	views clusterview.Board // what the last cycle decided from (view.go)
}

// New validates cfg and builds a scheduler; call Run to start it.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, errors.New("scheduler: Client is required")
	}
	if cfg.EventClient == nil {
		cfg.EventClient = cfg.Client
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Policy == "" {
		cfg.Policy = placement.DefaultPolicy
	}
	if cfg.Catalog == nil {
		cfg.Catalog = catalog.Default()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Resync <= 0 {
		cfg.Resync = time.Second
	}
	if cfg.PodInitialBackoff < 0 || cfg.PodMaxBackoff < 0 {
		return nil, fmt.Errorf("scheduler: --pod-initial-backoff and --pod-max-backoff must be >= 0 (0: the defaults %v and %v), got %v and %v", DefaultPodInitialBackoff, DefaultPodMaxBackoff, cfg.PodInitialBackoff, cfg.PodMaxBackoff)
	}
	if cfg.PodInitialBackoff == 0 {
		cfg.PodInitialBackoff = DefaultPodInitialBackoff
	}
	if cfg.PodMaxBackoff == 0 {
		cfg.PodMaxBackoff = max(DefaultPodMaxBackoff, cfg.PodInitialBackoff)
	}
	if cfg.PodMaxBackoff < cfg.PodInitialBackoff {
		return nil, fmt.Errorf("scheduler: --pod-max-backoff must be >= --pod-initial-backoff (%v), got %v", cfg.PodInitialBackoff, cfg.PodMaxBackoff)
	}
	pol, err := placement.New(cfg.Policy, placement.Options{Seed: cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("scheduler: --policy: %w", err)
	}
	if cfg.PreemptorWait <= 0 {
		cfg.PreemptorWait = preemptionWait
	}
	core, err := dispatch.New(dispatch.Config{InitialBackoff: cfg.PodInitialBackoff, MaxBackoff: cfg.PodMaxBackoff,
		ReservationWait: cfg.ReservationWait, PreemptorWait: cfg.PreemptorWait, Preemption: !cfg.DisablePreemption,
		MinRuntime: cfg.PreemptionMinRuntime, Noun: "pod"})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	s := &Scheduler{
		cfg: cfg, policy: pol, podPolicies: map[string]placement.Policy{}, wake: make(chan struct{}, 1),
		events: podstatus.New(cfg.EventClient, cfg.Client, cfg.Name, cfg.Log), assumed: map[string]*corev1.Pod{}, pending: map[string]*corev1.Pod{},
		dra:     draclaims.New(draclaims.Config{Client: cfg.Client, Catalog: cfg.Catalog, Log: cfg.Log}),
		metrics: schedmetrics.New(cfg.Metrics), core: core, queueObjects: func() []*unstructured.Unstructured { return nil },
		useObjects: func() ([]*unstructured.Unstructured, error) { return nil, nil },
	}
	if cfg.Metrics != nil { // each queue's published use, as the cluster view sums it, read at each scrape
		cfg.Metrics.MustRegister(clusterview.QueueUse{Source: clusterview.Source{Viewer: s}})
	}
	return s, nil
}

// Run starts the informers and schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(s.cfg.Client, 0, informers.WithTransform(trimObject)) // trim.go
	nodeInf, podInf, jobInf := f.Core().V1().Nodes(), f.Core().V1().Pods(), f.Batch().V1().Jobs()
	s.nodes, s.pods, s.members.Jobs = nodeInf.Lister(), podInf.Lister(), jobInf.Lister()
	kf, err := kubefilter.New(ctx, kubefilter.Config{SchedulerName: s.cfg.Name, Client: s.cfg.Client, Informers: f, Log: s.cfg.Log})
	if err != nil {
		return fmt.Errorf("kube-scheduler's filters: %w", err)
	}
	s.filter = kf
	// handlers are waited for as well as the caches: the first cycle
	// starts only once every object listed at start has reached them.
	var handlers []cache.InformerSynced
	type watched struct {
		what string
		inf  cache.SharedIndexInformer
		h    cache.ResourceEventHandler
	}
	ev := &informerEvents{name: s.cfg.Name, members: &s.members, inbox: &s.inbox, nodes: &s.changedNodes, pods: &s.changedPods, wake: s.wake}
	watches := []watched{{"nodes", nodeInf.Informer(), ev.nodeEvents()}, {"pods", podInf.Informer(), ev.podEvents()}, {"jobs", jobInf.Informer(), ev.jobEvents()},
		{"nodes for kube-scheduler's filters", nodeInf.Informer(), kf.NodeHandler()}, {"pods for kube-scheduler's filters", podInf.Informer(), kf.PodHandler()}}
	if draclaims.Served(s.cfg.Client, s.cfg.Log) {
		claimInf, sliceInf, classInf := f.Resource().V1().ResourceClaims(), f.Resource().V1().ResourceSlices(), f.Resource().V1().DeviceClasses()
		s.dra = draclaims.New(draclaims.Config{Claims: claimInf.Lister(), Slices: sliceInf.Lister(), Classes: classInf.Lister(),
			Client: s.cfg.Client, Catalog: s.cfg.Catalog, Log: s.cfg.Log})
		watches = append(watches, watched{"resource claims", claimInf.Informer(), ev.claimEvents()},
			watched{"resource slices", sliceInf.Informer(), ev.draEvents()}, watched{"device classes", classInf.Informer(), ev.draEvents()})
	}
	for _, h := range watches {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			return fmt.Errorf("watch %s: %w", h.what, err)
		}
		handlers = append(handlers, reg.HasSynced)
	}
	// Queues, PodGroups and GPUNodes change rarely, and any change may help.
	poke := ev.changeEvents()
	defaultInventory := s.cfg.Inventory == nil
	if defaultInventory {
		s.cfg.Inventory = nodeinventory.NewCache(nodeinventory.Labels{Catalog: s.cfg.Catalog})
	}
	if s.cfg.Dynamic != nil {
		watch := func(gvr schema.GroupVersionResource) *crdwatch.Watch {
			return crdwatch.New(ctx, gvr, s.cfg.Client, s.cfg.Dynamic, poke)
		}
		s.members.PodGroup = membership.FromObjects(watch(podgroups.Resource()).GetIn, podgroups.FromObject)
		s.members.VolcanoGroup = membership.FromObjects(watch(podgroups.VolcanoResource()).GetIn, podgroups.FromVolcano)
		s.members.SchedulerPluginsGroup = membership.FromObjects(watch(podgroups.SchedulerPluginsResource()).GetIn, podgroups.FromSchedulerPlugins)
		// Kubernetes' own PodGroups are served only with the GenericWorkload
		// gate: watched as the CRDs are, from when the API server serves them.
		s.members.WorkloadGroup = membership.FromObjects(watch(podgroups.WorkloadResource()).GetIn, podgroups.FromWorkload)
		qw := watch(queues.Resource())
		s.queueObjects = func() []*unstructured.Unstructured {
			objs, err := qw.List()
			if err != nil {
				s.cfg.Log.Warn("reading queues", "err", err)
			}
			return objs
		}
		// The nodes' GPU use, for the cluster view (the dashboard and the
		// per-queue use metric) and idle reclaim: no handler, so a use
		// write never wakes the loop; the informer starts at the first
		// read (crdwatch): no dashboard, scrape or reclaiming queue, no watch.
		uw := crdwatch.New(ctx, nodeuse.Resource(), s.cfg.Client, s.cfg.Dynamic, cache.ResourceEventHandlerFuncs{})
		s.snapMu.Lock()
		s.useObjects = (&clusterview.UseReader{List: uw.List, Wait: 2 * time.Second}).Read
		s.snapMu.Unlock()
		if defaultInventory {
			gw := crdwatch.New(ctx, gpunode.Resource(), s.cfg.Client, s.cfg.Dynamic, ev.inventoryEvents(poke))
			s.cfg.Inventory = nodeinventory.GPUNodes{Get: gw.Get, Fallback: s.cfg.Inventory}
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("sync %v informer: %w", typ, ctx.Err())
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), handlers...) {
		return fmt.Errorf("deliver the listed nodes, pods and jobs: %w", ctx.Err())
	}
	defer s.events.Stop()
	s.binder = podbind.Start(ctx, podbind.Workers)
	s.events.Start(ctx, podstatus.Writers)
	defer func() { s.binder.Stop(); s.binder = nil }()
	s.cfg.Log.Info("scheduler started", "name", s.cfg.Name, "policy", s.cfg.Policy)
	ticker := time.NewTicker(s.cfg.Resync)
	defer ticker.Stop()
	// retry wakes the loop when the first backoff ends.
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		st, err := s.cycle(ctx)
		if err != nil && ctx.Err() == nil {
			s.cfg.Log.Error("scheduling cycle failed", "err", err)
		}
		if s.cfg.CycleDone != nil {
			s.cfg.CycleDone(st)
		}
		retry.Stop()
		if !s.nextRetry.IsZero() {
			retry.Reset(max(time.Until(s.nextRetry), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-ticker.C:
		case <-retry.C:
		}
	}
}

// CycleStats counts what one cycle did.
type CycleStats struct {
	// Pending counts the pods the cycle took; Decisions what became of them.
	Pending int
	schedmetrics.Decisions
	// BackingOff counts the pods and gangs left out because they are
	// waiting out a backoff.
	BackingOff int
}

// cycle schedules every pending pod once, in queue order, against one
// snapshot that it updates as it binds. The snapshot is the last cycle's,
// brought up to date with what changed since (snapshot.go).
func (s *Scheduler) cycle(ctx context.Context) (CycleStats, error) {
	var st CycleStats
	cycleStart := time.Now()
	defer s.metrics.ObserveCycle(cycleStart)
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	snap, fresh := s.snap, s.snap == nil
	if fresh {
		snap = newSnapshot(s.core.ResetBooks(), s.cfg.Catalog, s.cfg.Log)
	}
	s.takeReports(snap)
	claims, err := s.dra.Claims() // with this scheduler's assumptions laid over them
	if err != nil {
		return st, err
	}
	if err := s.syncNodes(snap, fresh, s.changedNodes.take(), func(name string) (*corev1.Node, bool) {
		n, err := s.nodes.Get(name)
		return n, err == nil
	}); err != nil {
		return st, err
	}
	if err := s.takePods(snap, fresh); err != nil {
		return st, err
	}
	snap.claims.Sync(claims)
	s.snap = snap
	pending := s.waiting()
	st.Pending = len(pending)
	s.metrics.Pending(len(pending))
	gangs := s.members.GangSpecs(pending)
	waiting := map[string]int{}
	for _, p := range pending {
		waiting[s.members.Queue(p)]++
	}
	tree, skipped, err := queues.Tree(s.queueObjects())
	for _, e := range skipped {
		s.cfg.Log.Warn("queue ignored", "err", e)
	}
	if err != nil {
		s.cfg.Log.Error("queues are inconsistent; only the default queue is used", "err", err)
	}
	s.metrics.ObservePending(tree, waiting)
	if err := s.serve(ctx, snap, tree, pending, gangs, &st); err != nil {
		// The cycle may have booked what it did not record: book anew.
		s.snap = nil
		return st, err
	}
	s.metrics.BackingOff(st.BackingOff)
	s.publishView(s.now(), snap, tree, pending, waiting)
	if len(pending) > 0 {
		s.cfg.Log.Debug("scheduling cycle", "pending", len(pending), "bound", st.Bound, "unschedulable", st.Unschedulable, "invalid", st.Invalid, "errors", st.Errors, "backingOff", st.BackingOff, "nodes", len(snap.nodes))
	}
	return st, nil
}

// takeReports steps into the core and the assumed pods what informers and
// binding workers reported since the last cycle.
func (s *Scheduler) takeReports(snap *snapshot) {
	for _, r := range s.inbox.takeClaims() {
		if r.forget {
			s.dra.Forget(r.pod, r.ws)
		} else {
			s.dra.Wrote(r.written)
		}
	}
	changed, respecified, binds := s.inbox.take()
	if changed {
		s.core.ClusterChanged()
	}
	for _, id := range respecified {
		s.core.Respecified(id)
	}
	now := s.now()
	for _, r := range binds {
		if !r.ok {
			s.filter.Unreserve(r.uid) // never bound: kube-scheduler's cache must not keep it
		}
		if p := s.podNamed(snap, r.id); p == nil || p.UID != r.uid {
			continue // gone, or made again under its name: podGone forgot it
		}
		switch {
		case r.ok && r.bound != nil:
			s.assumed[r.id] = r.bound // bound after all, as read back
			s.bookPod(snap, r.bound)
			s.core.Bound(r.id)
		case r.ok:
			s.core.Bound(r.id)
		default:
			retry := s.core.BindFailed(r.id, now)
			delete(s.assumed, r.id)
			snap.releasePod(r.id)
			s.cfg.Log.Warn("binding failed; the pod stays pending", "pod", r.id, "retryIn", retry.Sub(now).Round(time.Millisecond), "err", r.err)
		}
	}
}

// now is the time the scheduling core decides at (Config.Clock; the real
// clock when none is given).
func (s *Scheduler) now() time.Time {
	if s.cfg.Clock == nil {
		return time.Now()
	}
	return s.cfg.Clock.Now()
}
