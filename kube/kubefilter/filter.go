package kubefilter

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// Config is what New needs.
type Config struct {
	// SchedulerName names the framework's profile (Tessera's scheduler
	// name; it appears in kube-scheduler's own log lines only).
	SchedulerName string
	// Client is what VolumeBinding binds claims with (PreBind).
	Client clientset.Interface
	// Informers give the volume plugins their listers (claims, volumes,
	// storage classes, CSI nodes, drivers and capacities, volume
	// attachments). New registers the informers it needs; the caller
	// starts the factory after New and waits for its caches to sync, as
	// kube-scheduler does.
	Informers informers.SharedInformerFactory
	// Log receives the cache's event errors (default slog.Default()).
	Log *slog.Logger
}

// Filter runs kube-scheduler's own hard-constraint plugins (PluginNames)
// over its own cache of the cluster (kube-scheduler's, fed by the caller
// with AddNode, AddPod and the rest).
type Filter struct {
	fw    framework.Framework
	cache cache.Cache
	// mu serialises Check: the snapshot is refreshed from the cache at the
	// start of each check and must not move under the plugins.
	mu       sync.Mutex
	snapshot *cache.Snapshot
	logger   klog.Logger
	log      *slog.Logger
	// assumed are the pods Reserve assumed, by UID, until their binding
	// is seen or Unreserve forgets them; deferred those of them not in the
	// cache yet (the next Check puts them there: a pod the plugins do not
	// concern costs the by-class path no cache update). amu guards both.
	amu      sync.Mutex
	assumed  map[types.UID]*corev1.Pod
	deferred map[types.UID]bool
	// reserved are the concerned pods the Reserve plugins passed, by UID,
	// with the cycle state their PreBind and Unreserve need (amu guards
	// it; the plugins run outside the lock).
	reserved map[types.UID]reservation
}

// Rejection is why one plugin turned a node down: the plugin's name and
// its own status reasons, as kube-scheduler reports them.
type Rejection struct {
	Plugin  string
	Reasons []string
	// Unresolvable: no preemption on the node could change it (the
	// plugin said UnschedulableAndUnresolvable: a node selector, a taint,
	// a volume's node), as kube-scheduler's preemption reads it.
	Unresolvable bool
}

func (r Rejection) String() string { return r.Plugin + ": " + strings.Join(r.Reasons, ", ") }

// Verdict is the answer for one pod over its candidate nodes.
type Verdict struct {
	// Fit are the candidates that pass every plugin, in the order given.
	Fit []string
	// Rejected holds, for every other candidate, the first plugin that
	// rejected it (kube-scheduler's order, PluginNames).
	Rejected map[string]Rejection
}

// NotInSnapshot names the rejection of a candidate the cache does not
// hold (removed, or never added by the caller).
const NotInSnapshot = "NotInSnapshot"

// New builds the framework over PluginNames. ctx bounds the goroutines
// kube-scheduler's cache and framework start (cache cleanup, metrics).
func New(ctx context.Context, cfg Config) (*Filter, error) {
	if cfg.Informers == nil || cfg.Client == nil {
		return nil, fmt.Errorf("kubefilter: Config needs Client and Informers")
	}
	// kube-scheduler's metric vectors are nil until registered; its
	// framework observes them on every run. They go to component-base's
	// registry, which Tessera does not serve.
	metrics.Register()
	p, err := profile(cfg.SchedulerName)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	f := &Filter{
		cache: cache.New(ctx, nil,
			utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload),
			utilfeature.DefaultFeatureGate.Enabled(features.CompositePodGroup)),
		snapshot: cache.NewEmptySnapshot(),
		logger:   logger,
		log:      cfg.Log,
		assumed:  map[types.UID]*corev1.Pod{},
		deferred: map[types.UID]bool{},
		reserved: map[types.UID]reservation{},
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	f.fw, err = frameworkruntime.NewFramework(ctx, registry(), p,
		frameworkruntime.WithClientSet(cfg.Client),
		frameworkruntime.WithInformerFactory(cfg.Informers),
		frameworkruntime.WithSnapshotSharedLister(f.snapshot),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(cfg.Informers.Storage().V1().CSINodes().Lister())),
		frameworkruntime.WithLogger(logger),
	)
	if err != nil {
		return nil, fmt.Errorf("kubefilter: kube-scheduler framework: %w", err)
	}
	return f, nil
}

// Check runs the plugins for pod on each candidate node (by name). Pod is
// not modified; the plugins see a copy without Tessera's GPU resources
// (ForFramework). An error is a plugin's or the snapshot's failure, not a
// rejection.
func (f *Filter) Check(ctx context.Context, pod *corev1.Pod, candidates []string) (Verdict, error) {
	v, _, err := f.check(ctx, ForFramework(pod), candidates)
	return v, err
}

// check is Check for p, the pod as the plugins see it (ForFramework), and
// also returns the cycle state the plugins wrote (Reserve carries it on
// to the Reserve and PreBind plugins, as kube-scheduler does).
func (f *Filter) check(ctx context.Context, p *corev1.Pod, candidates []string) (Verdict, fwk.CycleState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refresh(p); err != nil {
		return Verdict{}, nil, err
	}
	state := framework.NewCycleState()
	v := Verdict{Rejected: map[string]Rejection{}}
	pre, st, narrowing := f.fw.RunPreFilterPlugins(ctx, state, p)
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return Verdict{}, nil, fmt.Errorf("kubefilter: pod %s: %w", key(p), st.AsError())
		}
		// As kube-scheduler: a PreFilter rejection holds for every node.
		r := rejection(st, narrowing)
		for _, n := range candidates {
			v.Rejected[n] = r
		}
		return v, state, nil
	}
	for _, n := range candidates {
		if !pre.AllNodes() && !pre.NodeNames.Has(n) {
			v.Rejected[n] = Rejection{Plugin: strings.Join(sets.List(narrowing), ","),
				Reasons: []string{fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(narrowing))}, Unresolvable: true}
			continue
		}
		info, err := f.snapshot.NodeInfos().Get(n)
		if err != nil {
			v.Rejected[n] = Rejection{Plugin: NotInSnapshot, Reasons: []string{err.Error()}, Unresolvable: true}
			continue
		}
		st := f.fw.RunFilterPlugins(ctx, state, p, info)
		switch {
		case st.IsSuccess():
			v.Fit = append(v.Fit, n)
		case st.IsRejected():
			v.Rejected[n] = rejection(st, nil)
		default:
			return Verdict{}, nil, fmt.Errorf("kubefilter: pod %s on node %s: %w", key(p), n, st.AsError())
		}
	}
	return v, state, nil
}

// refresh brings the snapshot up to the cache, the deferred picks put in
// it first, before the plugins run for pod (f.mu held).
func (f *Filter) refresh(pod *corev1.Pod) error {
	if err := f.assumeDeferred(); err != nil {
		return err
	}
	if err := f.cache.UpdateSnapshot(f.logger, f.snapshot); err != nil {
		return fmt.Errorf("kubefilter: snapshot for pod %s: %w", key(pod), err)
	}
	return nil
}

func rejection(st *fwk.Status, narrowing sets.Set[string]) Rejection {
	plugin := st.Plugin()
	if plugin == "" {
		plugin = strings.Join(sets.List(narrowing), ",")
	}
	return Rejection{Plugin: plugin, Reasons: slices.Clone(st.Reasons()), Unresolvable: st.Code() == fwk.UnschedulableAndUnresolvable}
}

// The cluster as the plugins see it: the caller mirrors nodes and pods
// (bound, and bound by Tessera but not yet observed: AssumePod) into
// kube-scheduler's cache, which each Check snapshots incrementally.

// AddNode adds or replaces a node.
func (f *Filter) AddNode(n *corev1.Node) { f.cache.AddNode(f.logger, n) }

// UpdateNode replaces old with n.
func (f *Filter) UpdateNode(old, n *corev1.Node) { f.cache.UpdateNode(f.logger, old, n) }

// RemoveNode removes a node (its pods stay until removed).
func (f *Filter) RemoveNode(n *corev1.Node) error {
	return wrap("remove node "+n.Name, f.cache.RemoveNode(f.logger, n))
}

// AddPod adds a pod bound to a node (spec.nodeName set); an assumed pod
// (AssumePod) it confirms.
func (f *Filter) AddPod(p *corev1.Pod) error {
	return wrap("add pod "+key(p), f.cache.AddPod(f.logger, p))
}

// UpdatePod replaces old with p.
func (f *Filter) UpdatePod(old, p *corev1.Pod) error {
	return wrap("update pod "+key(p), f.cache.UpdatePod(f.logger, old, p))
}

// RemovePod removes a bound pod.
func (f *Filter) RemovePod(p *corev1.Pod) error {
	return wrap("remove pod "+key(p), f.cache.RemovePod(f.logger, p))
}

// AssumePod counts p (spec.nodeName set to its pick) before the binding
// is observed, so the next checks see it, as kube-scheduler assumes.
func (f *Filter) AssumePod(p *corev1.Pod) error {
	return wrap("assume pod "+key(p), f.cache.AssumePod(f.logger, p))
}

// ForgetPod undoes AssumePod when the binding fails.
func (f *Filter) ForgetPod(p *corev1.Pod) error {
	return wrap("forget pod "+key(p), f.cache.ForgetPod(f.logger, p))
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("kubefilter: %s: %w", what, err)
}
