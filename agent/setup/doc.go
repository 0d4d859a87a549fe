// Package setup assembles a production node agent from its options:
// discovery, Kubernetes clients, kubelet's sockets, NVML health events and
// the metrics server, then runs it. `tessera agent` (cmd/tessera/cli) parses
// and validates flags and calls Run; tests build agents from the parts.
//
// It only wires: decisions live in agent and its subpackages.
package setup
