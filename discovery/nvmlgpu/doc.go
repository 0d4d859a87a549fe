// Package nvmlgpu discovers NVIDIA GPUs through NVML (github.com/NVIDIA/go-nvml),
// which loads libnvidia-ml.so.1 at run time, so Tessera builds and runs on
// machines without an NVIDIA driver and reports ErrUnavailable there.
//
// Source.Discover reads devices (memory, compute capability, MIG devices,
// NUMA affinity, PCI bus ids) and the NVLink and PCIe topology between them;
// Source.WatchHealth reports GPUs that critical XID or double-bit ECC events
// make unhealthy. NewWithInterface takes any nvml.Interface, such as the
// mocks of github.com/NVIDIA/go-nvml/pkg/nvml/mock.
//
// It reads devices, topology and health events; it must not keep bookings or
// change any device setting.
package nvmlgpu
