// Package conformance holds one table test with the stock kube-scheduler
// as the oracle: on the real control plane (etcd, kube-apiserver, KWOK
// nodes), each row's pods are scheduled first by kube-scheduler and then,
// deleted and made again, by Tessera's scheduler on the same nodes and
// objects, and the outcomes must be the same: which pods bind, and where
// when the row's constraint decides. The oracle's pods carry no GPU keys
// (stock kube-scheduler cannot place Tessera's shares): a GPU row compares
// the outcome of its other constraint. A row's claims and volumes are made
// for each run and deleted with its pods; kube-controller-manager's PV
// binder binds them, and the test plays the external provisioner of a
// dynamic WaitForFirstConsumer class. Preemption rows end once no pod of
// theirs is being deleted or waits nominated to a node (a victim ends
// gone); gang rows' Workload API PodGroups (the GenericWorkload gate, on
// the API server and kube-scheduler) are made per run as the claims are.
// It holds no product code and must not be imported.
package conformance
