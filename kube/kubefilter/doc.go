// Package kubefilter runs kube-scheduler's own hard-constraint plugins
// (k8s.io/kubernetes v1.37.2: NodeName, NodeUnschedulable,
// TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
// VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone,
// PodTopologySpread, InterPodAffinity, NodeDeclaredFeatures) as a
// library, through the framework runtime with kube-scheduler's default
// plugin arguments, over kube-scheduler's own cache of the cluster, which the caller feeds
// (NodeHandler and PodHandler on its informers, as kube-scheduler's own
// handlers; AddNode, AddPod, ...). For one pod and its candidate nodes
// it answers which pass every plugin and, for each other one, the first
// plugin that rejected it with that plugin's own message. Concerns tells
// whether the plugins could rule out anything Tessera's fast path does not
// already check, so pods they do not concern keep being decided by class.
// For a scheduling cycle: Exclude adds the plugins' rejections to a
// concerned pod's node exclusion (one Check over the nodes); Reserve assumes
// every pick, a concerned pod's checked again first with the earlier picks
// assumed and then passed through the plugins' Reserve (VolumeBinding takes
// the volumes it chose); PreBind runs the PreBind plugins before the
// binding is written (VolumeBinding binds the claims, or names the node on
// a claim to provision and waits for its volume); Unreserve gives back what
// Reserve took when the step is discarded or the binding fails. For soft
// constraints, Prefers tells whether a pod has any, and Scores rates nodes
// for it with kube-scheduler's own score plugins (SoftScorers).
//
// GPU resources (workload.GPUResources: tessera.io/gpu, the migration
// keys and tessera.io/gpu-milli, a quota count no node advertises) are removed from the pod the plugins see: a fractional
// tessera.io/gpu: 1 is a share that Tessera's placement engine places,
// not one of the node's allocatable units, and NodeResourcesFit would
// otherwise refuse every node that does not advertise the name, or count
// two half-GPU pods as two GPUs. Every other resource (ephemeral storage,
// hugepages, extended resources such as rdma/hca) is NodeResourcesFit's.
//
// It must not re-implement a plugin, place GPUs, pick nodes (Scores rates
// them; the caller's placement policy decides), bind pods or talk to the
// API server itself (the volume plugins read through the caller's
// informers and write through its client in PreBind). New calls kube-scheduler's metrics.Register
// once: its framework observes metric vectors that are nil until then.
package kubefilter
