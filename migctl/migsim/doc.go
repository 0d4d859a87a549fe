// Package migsim is a simulated NVIDIA driver for MIG, behind go-nvml's
// interfaces: GPUs in MIG mode on which GPU and compute instances are
// created and destroyed as NVML documents it, with the slot rules of the
// catalog (a profile's placement size and valid starts, no overlap, at
// most one +me instance per GPU; catalog MIGSpec.CanPlace), not go-nvml's
// mock tables (whose H100 3g and 7g sizes disagree with NVIDIA's MIG User
// Guide).
//
// It serves two callers: tests of migctl, the node agent and the host
// daemon, which inject driver failures (creation refused, an error between
// the GPU and the compute instance, a failed destroy) and mark instances
// busy; and simulated hosts (a `sim:` source with GPUs whose MIG layout
// Tessera manages), whose instances it keeps in memory.
//
// It must not decide anything Tessera decides (placement, bookings): it
// only answers NVML calls as the driver would. Only the calls migctl and
// agent/cdi make are implemented; any other panics through the nil
// embedded interface.
package migsim
