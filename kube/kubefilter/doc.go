// Package kubefilter runs kube-scheduler's own hard-constraint plugins
// (k8s.io/kubernetes v1.37.2: NodeName, NodeUnschedulable,
// TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
// VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone,
// PodTopologySpread, InterPodAffinity) as a library, through the
// framework runtime with kube-scheduler's default plugin arguments, over
// kube-scheduler's own cache of the cluster, which the caller feeds
// (NodeHandler and PodHandler on its informers, as kube-scheduler's own
// handlers; AddNode, AddPod, ...). For one pod and its candidate nodes
// it answers which pass every plugin and, for each other one, the first
// plugin that rejected it with that plugin's own message. Concerns tells
// whether the plugins could rule out anything Tessera's fast path does not
// already check, so pods they do not concern keep being decided by class.
// For a scheduling cycle: Exclude adds the plugins' rejections to a
// concerned pod's node exclusion (one Check over the nodes); Reserve assumes
// every pick, a concerned pod's checked again first with the earlier picks
// assumed; Unreserve forgets it when the step is discarded or the binding
// fails.
//
// GPU resources (workload.GPUResources: tessera.io/gpu and the migration
// keys) are removed from the pod the plugins see: a fractional
// tessera.io/gpu: 1 is a share that Tessera's placement engine places,
// not one of the node's allocatable units, and NodeResourcesFit would
// otherwise refuse every node that does not advertise the name, or count
// two half-GPU pods as two GPUs. Every other resource (ephemeral storage,
// hugepages, extended resources such as rdma/hca) is NodeResourcesFit's.
//
// It must not re-implement a plugin, place GPUs, rank or pick nodes, bind
// pods or talk to the API server itself (the volume plugins read through
// the caller's informers). New calls kube-scheduler's metrics.Register
// once: its framework observes metric vectors that are nil until then.
package kubefilter
