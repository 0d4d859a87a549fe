// Package dra is the node agent's Dynamic Resource Allocation kubelet
// plugin (driver gpu.tessera.io): it prepares the ResourceClaims kubelet
// hands it as the device plugin hands out a share today, and undoes that
// when kubelet unprepares them. It runs on the kubeletplugin helper of
// k8s.io/dynamic-resource-allocation, which registers with kubelet, serves
// the DRA gRPC API and reads the claims from the API server.
//
// Preparing a claim reads its allocation as shares (kube/dra Shares),
// seats them with the node arbiter under a key derived from the claim's
// UID (state folder under handoff.Paths.HostStateRoot), writes one CDI
// spec per claim (kind gpu.tessera.io/claim, device named by the claim's
// UID) whose container edits are the device nodes and what handoff.Build
// gives the container (environment, mounts, interception library), and
// records the claim in a journal in the state folder before it answers,
// so a restarted agent seats the claims again, keeps their specs and
// answers kubelet's retries the same.
//
// It must not decide which devices a claim gets (the scheduler allocates,
// kube/dra reads the allocation), nor what a container's environment says
// (agent/handoff), nor publish ResourceSlices (agent/kube does).
// docs/dra.md says how it is enabled.
package dra
