package jobenv

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/binding"
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
	shares = slices.Clone(shares)
	sort.SliceStable(shares, func(i, j int) bool { return shares[i].Index < shares[j].Index })
	var uuids, req, lim, memReq, memLim, migProfiles, migParents []string
	mig := false
	for _, s := range shares {
		mig = mig || s.MIGProfile != ""
		migProfiles = append(migProfiles, s.MIGProfile)
		migParents = append(migParents, o.GPUUUIDs[s.Index])
		uuids = append(uuids, s.UUID)
		req = append(req, fmt.Sprintf("%dm", s.ComputeMilli))
		lim = append(lim, fmt.Sprintf("%dm", s.ComputeLimitMilli))
		memReq = append(memReq, fmt.Sprintf("%dMi", s.MemoryMiB))
		memLim = append(memLim, fmt.Sprintf("%dMi", s.MemoryLimitMiB))
	}
	visible := strings.Join(uuids, ",")
	if visible == "" {
		visible = "void"
	}
	set := map[string]string{
		"CUDA_VISIBLE_DEVICES":    visible,
		"NVIDIA_VISIBLE_DEVICES":  visible,
		"CUDA_DEVICE_ORDER":       "PCI_BUS_ID",
		"TESSERA_JOB_ID":          o.JobID,
		"TESSERA_QUEUE":           o.Queue,
		"TESSERA_CONTAINER_ID":    o.JobID,
		"TESSERA_GPU_UUIDS":       strings.Join(uuids, ","),
		"TESSERA_COMPUTE_REQUEST": strings.Join(req, ","),
		"TESSERA_COMPUTE_LIMIT":   strings.Join(lim, ","),
		"TESSERA_MEMORY_REQUEST":  strings.Join(memReq, ","),
		"TESSERA_MEMORY_LIMIT":    strings.Join(memLim, ","),
		"TESSERA_SHM_DIR":         o.ShmDir,
		"TESSERA_OVERSUBSCRIBE":   "0",
		"TESSERA_COMPUTE_FAIL":    o.ComputeFail,
	}
	if set["TESSERA_COMPUTE_FAIL"] == "" {
		set["TESSERA_COMPUTE_FAIL"] = "open"
	}
	if o.ArbiterRegion != "" {
		set["TESSERA_ARBITER_REGION"] = o.ArbiterRegion
	}
	for k, v := range o.ClientEnv {
		if _, own := set[k]; !own && k != "LD_PRELOAD" && !strings.HasPrefix(k, "TESSERA_") {
			set[k] = v
		}
	}
	if mig {
		set["TESSERA_MIG_PROFILES"] = strings.Join(migProfiles, ",")
		set["TESSERA_MIG_PARENT_UUIDS"] = strings.Join(migParents, ",")
	}
	out := make([]string, 0, len(base)+len(set))
	preload := ""
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if k == "LD_PRELOAD" {
			preload = v
			continue
		}
		if _, ok := set[k]; ok || k == "TESSERA_ARBITER_REGION" || k == "TESSERA_MIG_PROFILES" || k == "TESSERA_MIG_PARENT_UUIDS" {
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
