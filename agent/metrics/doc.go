// Package metrics serves the node agent's Prometheus metrics: per GPU
// utilisation, memory, temperature, power and health, and per container
// the GPU shares handed out and, once the arbiter reports it, the memory
// used. docs/metrics.md lists every metric and label.
//
// GPU figures come from a GPUStats: NVML on a GPU host (nvml.go), or
// Simulated (simulated.go) elsewhere, whose series carry source="simulated".
// Per-container usage comes from a ContainerUsage the arbiter will provide;
// without one the usage metric is absent, never invented. The package only
// reads and exposes: it must not change devices or allocations.
package metrics
