package kubefilter

import (
	"fmt"

	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodedeclaredfeatures"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodename"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumebinding"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumerestrictions"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumezone"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// PluginNames are the hard-constraint plugins run, in kube-scheduler's
// default order (so the first to reject a node is the one kube-scheduler
// names).
func PluginNames() []string {
	return []string{
		names.NodeName,
		names.NodeUnschedulable,
		names.TaintToleration,
		names.NodeAffinity,
		names.NodePorts,
		names.NodeResourcesFit,
		names.VolumeRestrictions,
		names.NodeVolumeLimits,
		names.VolumeBinding,
		names.VolumeZone,
		names.PodTopologySpread,
		names.InterPodAffinity,
		names.NodeDeclaredFeatures,
	}
}

// registry holds the in-tree factories of Plugins, plus the queue sort and
// binder the framework runtime insists on (never called here).
func registry() frameworkruntime.Registry {
	fts := plfeature.NewSchedulerFeaturesFromGates(feature.DefaultFeatureGate)
	return frameworkruntime.Registry{
		nodename.Name:             frameworkruntime.FactoryAdapter(fts, nodename.New),
		nodeunschedulable.Name:    frameworkruntime.FactoryAdapter(fts, nodeunschedulable.New),
		tainttoleration.Name:      frameworkruntime.FactoryAdapter(fts, tainttoleration.New),
		nodeaffinity.Name:         frameworkruntime.FactoryAdapter(fts, nodeaffinity.New),
		nodeports.Name:            frameworkruntime.FactoryAdapter(fts, nodeports.New),
		noderesources.Name:        frameworkruntime.FactoryAdapter(fts, noderesources.NewFit),
		volumerestrictions.Name:   frameworkruntime.FactoryAdapter(fts, volumerestrictions.New),
		nodevolumelimits.CSIName:  frameworkruntime.FactoryAdapter(fts, nodevolumelimits.NewCSI),
		volumebinding.Name:        frameworkruntime.FactoryAdapter(fts, volumebinding.New),
		volumezone.Name:           frameworkruntime.FactoryAdapter(fts, volumezone.New),
		podtopologyspread.Name:    frameworkruntime.FactoryAdapter(fts, podtopologyspread.New),
		interpodaffinity.Name:     frameworkruntime.FactoryAdapter(fts, interpodaffinity.New),
		nodedeclaredfeatures.Name: frameworkruntime.FactoryAdapter(fts, nodedeclaredfeatures.New),
		queuesort.Name:            queuesort.New,
		defaultbinder.Name:        defaultbinder.New,
	}
}

// profile enables PluginNames at every extension point each implements
// (MultiPoint: PreFilter, Filter, Reserve, PreBind; PreScore and Score
// only for SoftScorers), with the arguments kube-scheduler v1's defaulting gives them, the
// defaults a stock kube-scheduler runs with (system-default topology spread
// constraints among them).
func profile(name string) (*config.KubeSchedulerProfile, error) {
	def, err := latest.Default()
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler default configuration: %w", err)
	}
	if len(def.Profiles) == 0 {
		return nil, fmt.Errorf("kube-scheduler default configuration has no profile")
	}
	run := PluginNames()
	wanted := make(map[string]bool, len(run))
	var set config.PluginSet
	for _, n := range append([]string{queuesort.Name}, append(run, defaultbinder.Name)...) {
		set.Enabled = append(set.Enabled, config.Plugin{Name: n})
		wanted[n] = true
	}
	var args []config.PluginConfig
	for _, pc := range def.Profiles[0].PluginConfig {
		if wanted[pc.Name] {
			args = append(args, pc)
		}
	}
	// Scoring is for soft constraints alone (Scores): the packing policy,
	// not NodeResourcesFit's or the volume plugins' scores, rates nodes.
	soft := config.PluginSet{Disabled: []config.Plugin{{Name: "*"}}}
	for _, pl := range SoftScorers() {
		soft.Enabled = append(soft.Enabled, config.Plugin{Name: pl.Name, Weight: pl.Weight})
	}
	return &config.KubeSchedulerProfile{
		SchedulerName: name,
		Plugins:       &config.Plugins{MultiPoint: set, PreScore: soft, Score: soft},
		PluginConfig:  args,
	}, nil
}

// Scorer is a score plugin and its weight.
type Scorer struct {
	Name   string
	Weight int32
}

// SoftScorers are the score plugins of soft constraints, with the weights
// kube-scheduler's default profile gives them: preferred node affinity,
// PreferNoSchedule taints, preferred pod (anti-)affinity (the pod's and
// placed pods'), and ScheduleAnyway topology spread.
func SoftScorers() []Scorer {
	return []Scorer{
		{names.TaintToleration, 3},
		{names.NodeAffinity, 2},
		{names.PodTopologySpread, 2},
		{names.InterPodAffinity, 2},
	}
}
