// Package discovery defines how Tessera learns what GPUs exist: a Source
// returns inventory.Nodes. Backends live in subpackages: simulated (from a
// spec such as "8xH200" or a YAML file) and nvmlgpu (NVIDIA's NVML, loaded at
// run time). Open picks a backend from a source string such as "sim:8xH200"
// or "local". MarkMIGManaged applies the operator's --mig-managed choice
// (GPUs in MIG mode whose layout Tessera manages) to a discovered node.
//
// Discovery reports devices; it must not decide placement or keep bookings.
package discovery
