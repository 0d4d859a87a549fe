// Package migctl creates and destroys MIG instances on a node, for GPUs
// whose MIG layout the operator hands to Tessera (dynamic MIG; docs/mig.md).
//
// It owns the NVML side of a placement the engine already chose: a GPU
// instance of a profile at a start slot (nvmlDeviceCreateGpuInstanceWithPlacement),
// its compute instance spanning it, the MIG device UUID that names both to
// a container, and destroying them when the workload ends. Create never
// leaves half an instance behind: a failure after the GPU instance exists
// destroys it. Manager books instances by workload, so one slot is never
// handed to two workloads, and adopts the instances it finds after a
// restart (Reconcile) without destroying any that is in use; with a
// journal file (Manager.Journal) an instance is recorded before the driver
// creates it, so one made just before a crash is found and destroyed.
// Manager.Layout re-reads the managed GPUs' instances from the driver with
// the workload holding each, the layout the front doors publish
// (InventoryOf turns it into inventory instances).
// Open finds managed GPUs through NVML (refusing one not in MIG mode) and
// ForNode builds the manager of a node's managed GPUs, real or simulated
// (migctl/migsim, a simulated driver following the catalog's slot rules).
//
// It must not choose placements (the engine does), switch MIG mode (the
// operator does; Tessera never changes it), or touch a GPU that is not
// managed. It speaks to NVML through go-nvml's interfaces only, so tests
// drive it with migsim.
package migctl
