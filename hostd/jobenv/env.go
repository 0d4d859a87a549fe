package jobenv

import (
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/shareenv"
)

// Options are the host-wide parts of a job's environment.
type Options struct {
	// JobID names the job; it is also TESSERA_CONTAINER_ID.
	JobID string
	// Queue is the job's queue.
	Queue string
	// ShmDir is the job's private accounting folder (absolute).
	ShmDir string
	// InterceptLib, when set, is preloaded (LD_PRELOAD, prepended to any
	// LD_PRELOAD already in the base environment).
	InterceptLib string
	// ArbiterRegion is the compute grant file; empty until the node
	// arbiter runs on the host, in which case compute is not gated.
	ArbiterRegion string
	// ComputeFail is TESSERA_COMPUTE_FAIL; "open" when empty.
	ComputeFail string
	// GPUUUIDs maps GPU index to the physical GPU's UUID, for the parents
	// of MIG instances (TESSERA_MIG_PARENT_UUIDS).
	GPUUUIDs map[int]string
	// ClientEnv are the variables the node arbiter gives the job (in MPS
	// mode CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
	// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), set over the base environment.
	// They never replace the daemon's own (LD_PRELOAD, CUDA_VISIBLE_DEVICES,
	// NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, TESSERA_*).
	ClientEnv map[string]string
}

// Build returns base with the job's variables set (replacing any of the
// same name), sorted by name. Devices are listed in GPU index order, so
// CUDA ordinal i and item i of every per-device list are the same GPU.
func Build(base []string, shares []binding.Share, o Options) []string {
	computeFail := o.ComputeFail
	if computeFail == "" {
		computeFail = "open"
	}
	set := shareenv.Vars(shares, shareenv.Settings{
		ContainerID: o.JobID, ShmDir: o.ShmDir, ArbiterRegion: o.ArbiterRegion,
		ComputeFail: computeFail, MIGParents: o.GPUUUIDs,
	})
	if set[shareenv.CUDAVisibleDevices] == "" {
		set[shareenv.CUDAVisibleDevices] = "void"
	}
	set["NVIDIA_VISIBLE_DEVICES"] = set[shareenv.CUDAVisibleDevices]
	set[shareenv.JobID] = o.JobID
	set[shareenv.Queue] = o.Queue
	for k, v := range o.ClientEnv {
		if _, own := set[k]; !own && k != "LD_PRELOAD" && !strings.HasPrefix(k, "TESSERA_") {
			set[k] = v
		}
	}
	out := make([]string, 0, len(base)+len(set))
	preload := ""
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if k == "LD_PRELOAD" {
			preload = v
			continue
		}
		if _, ok := set[k]; ok || shareenv.Owned(k) {
			continue
		}
		out = append(out, kv)
	}
	if o.InterceptLib != "" {
		preload = strings.TrimSpace(o.InterceptLib + " " + preload)
	}
	if preload != "" {
		out = append(out, "LD_PRELOAD="+preload)
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
