package migsim

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Lib is the NVML library of a host with GPUs, each in MIG mode: it
// finds a GPU by index or UUID and a MIG device by its UUID. Init and
// Shutdown always succeed.
type Lib struct {
	nvml.Interface
	GPUs []*GPU
}

// Init implements nvml.Interface.
func (l *Lib) Init() nvml.Return { return nvml.SUCCESS }

// Shutdown implements nvml.Interface.
func (l *Lib) Shutdown() nvml.Return { return nvml.SUCCESS }

// DeviceGetCount implements nvml.Interface.
func (l *Lib) DeviceGetCount() (int, nvml.Return) { return len(l.GPUs), nvml.SUCCESS }

// DeviceGetHandleByIndex implements nvml.Interface.
func (l *Lib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i < 0 || i >= len(l.GPUs) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return l.GPUs[i], nvml.SUCCESS
}

// DeviceGetHandleByUUID implements nvml.Interface: a GPU, or the MIG
// device of a compute instance.
func (l *Lib) DeviceGetHandleByUUID(uuid string) (nvml.Device, nvml.Return) {
	for _, g := range l.GPUs {
		if g.uuid == uuid {
			return g, nvml.SUCCESS
		}
		g.mu.Lock()
		ci := g.byUUIDLocked(uuid)
		g.mu.Unlock()
		if ci != nil {
			return &migDevice{ci: ci}, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// MaxGPUInstanceID and MaxComputeInstanceID bound the ids the driver lists
// capabilities for in its mig-minors file.
const (
	MaxGPUInstanceID     = 14
	MaxComputeInstanceID = 7
)

// MIGMinors is the driver's /proc/driver/nvidia-caps/mig-minors for the
// host: a fixed list, written when the driver loads, of a capability
// minor for every GPU instance and compute instance id each GPU may ever
// have, whether it exists or not; so a spec can be written for an
// instance created after it.
func (l *Lib) MIGMinors() string {
	var b strings.Builder
	b.WriteString("config 1\nmonitor 2\n")
	next := 3
	for _, g := range l.GPUs {
		for gi := 0; gi <= MaxGPUInstanceID; gi++ {
			fmt.Fprintf(&b, "gpu%d/gi%d/access %d\n", g.minor, gi, next)
			next++
			for ci := 0; ci <= MaxComputeInstanceID; ci++ {
				fmt.Fprintf(&b, "gpu%d/gi%d/ci%d/access %d\n", g.minor, gi, ci, next)
				next++
			}
		}
	}
	return b.String()
}
