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
// dynamic WaitForFirstConsumer class. It holds no product code and must
// not be imported.
package conformance
