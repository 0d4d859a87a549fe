// Package kube is the agent's Kubernetes side: the keys Tessera uses on pods
// and nodes (the assignment annotation, the extended resources), reading
// pods bound to the node, kubelet's PodResources API, and publishing the
// node's GPU inventory as a GPUNode object (CRD tessera.io/v1alpha1) and as
// extended resources on the Node, and its GPU use as a GPUUse object
// (UsePublisher, paced by agent/usepub).
//
// It translates between Kubernetes objects and the agent's own types
// (handoff.Pod, inventory.Node). It must not decide which container gets
// which GPU (agent/handoff does) or speak the device plugin protocol.
package kube
