// Package clusterinv reads a Kubernetes cluster's GPU inventory for
// `tessera show-gpus --source kube`: it finds the cluster as kubectl does
// (--kubeconfig, $KUBECONFIG merged, ~/.kube/config, in-cluster; --context),
// lists the GPUNode objects, the Nodes (for their pool label) and the bound
// pods, and returns inventory.Nodes whose GPUs carry what the bound pods
// hold (kube/boundpods: the scheduler's own accounting) plus each node's
// pool and each GPU's use from the nodes' GPUUse objects (kube/nodeuse; a
// missing or stale one is not metered, and says why), the pure input of
// package gpusummary. The GPUUse reading rules (StaleUse, IdleSince: which
// pods are idle holders) are the scheduler's too, so both read use alike.
//
// Its errors say what a kubectl user needs to fix: no kubeconfig, an
// unknown context (with the known ones), an unreachable server (address
// and cause), the GPUNode CRD missing (how to install it), RBAC denials
// (verb and resource).
//
// It reads only: it must not write to the cluster, count capacity itself
// (gpusummary does) or print.
package clusterinv
