// Package agent is the Tessera node agent: it tells the cluster what GPUs
// the node has, hands each container exactly the GPU shares the scheduler
// recorded for it, and reports what is used.
//
// It wires the pieces together: discovery feeds the device list
// (devices.go) that the kubelet device plugin (agent/deviceplugin)
// advertises; the Allocator (allocator.go) answers kubelet's Allocate and
// PreStartContainer calls using agent/handoff and keeps every allocation in
// a checkpoint (agent/checkpoint) so a restart loses nothing; agent/kube
// publishes the inventory; agent/metrics serves /metrics; with a CDI spec
// folder configured, agent/cdi writes the node's CDI spec at start. On an
// MPS node (Config.MPS, `--sharing mps`) Allocate admits only one-GPU
// containers of hostIPC pods and adds the arbiter's MPS client variables
// and pipe folder mount. On a node with managed MIG GPUs (Config.MIG,
// `--mig-managed`) Allocate creates the MIG instances assignments ask for,
// the reconcile destroys those of ended pods, and New settles them after a
// restart from the checkpoint and the MIG journal; with a CDI spec the
// created instances' devices are added to it. After every such change the
// inventory is published again, asynchronously and coalesced, with the
// managed GPUs' instances re-read from the driver and each instance a
// container holds marked in use (refreshMIG). docs/handoff.md and
// docs/metrics.md describe the design and the contract.
//
// It must not choose placements (the scheduler does) or enforce shares
// inside containers (the interception library and the arbiter do).
package agent
