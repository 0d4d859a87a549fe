// Package e2enode holds the end-to-end tests on a real node: a kubelet
// with containerd and runc (test/testcluster's StartRealNode) runs
// Tessera's image with the chart's rendered manifests (the scheduler, the
// admission webhook and the node agent as a DaemonSet pod on simulated
// GPUs), and pods get their GPU shares from it as they would on a cluster.
//
// It owns those tests and the probe program their pods run (probe/). It
// must not hold code the product uses: everything under test comes from
// the image built by `make image`.
package e2enode
