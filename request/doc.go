// Package request defines what a workload asks of GPUs, the one request
// type shared by the Kubernetes scheduler, the host daemon and the trace
// simulator, with its validation and its parsing from string fields
// (command-line flags, pod annotations).
//
// A request is per GPU: Count GPUs, each with a guaranteed compute share and
// a burst limit, a guaranteed memory amount and a memory limit. Defaults are
// explicit and documented on GPU; anything out of range is an error naming
// the field and the allowed range.
//
// The package must not place, bind or enforce; it only describes and checks.
package request
