// Package nvmlmeter implements arbiter.Meter with NVML: it follows each
// GPU's sampling ticks (the device utilisation samples of
// nvmlDeviceGetSamples), attributes the per-process utilisation samples of
// each tick (nvmlDeviceGetProcessUtilization, both through
// github.com/NVIDIA/go-nvml) to the tick's length, maps each process to the
// arbiter client (container or job) it belongs to with a Resolver, and
// reports each client's busy GPU time over the ticks that ended since the
// previous reading. NVML gives a tick shared by several processes wholly to
// one of them, so a reading is right only summed over many ticks; the
// arbiter sums them (Meter.Read says more).
//
// Resolvers:
//   - Cgroup parses /proc/<pid>/cgroup (cgroup v1 and v2; containerd,
//     CRI-O and Docker path shapes, cgroupfs and systemd drivers) into a
//     Kubernetes pod UID and container ID, and asks a lookup for the key;
//   - Environ reads TESSERA_CONTAINER_ID from /proc/<pid>/environ;
//   - ProcTree maps a process to the job whose root process (for the host
//     daemon, the job's supervisor) it descends from;
//   - First tries several in order.
//
// Every resolver takes a proc root, so tests run on a fake /proc.
//
// The package only reads: it must not change device settings, and it does
// not decide anything; the arbiter turns the busy times into token rates.
// Package arbiter does not import it (nor go-nvml); the node agent and the
// host daemon construct it when their GPUs come from NVML.
package nvmlmeter
