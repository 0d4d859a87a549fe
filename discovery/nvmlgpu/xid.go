package nvmlgpu

import (
	"fmt"

	"github.com/tessera-gpu/tessera/inventory"
)

// xidHealth says what an XID (an error the NVIDIA driver logs, and NVML
// reports as a critical XID event) means for the GPU's health, with a reason
// such as "XID 79: GPU has fallen off the bus".
//
// Well-known XIDs that leave the GPU unusable until it is reset, drained or
// replaced make it Unhealthy:
//
//	48   double-bit ECC error
//	62   internal micro-controller halt
//	63   ECC page retirement or row remapping recorded (reset to apply)
//	64   ECC page retirement or row remapping failed
//	74   NVLink error
//	79   GPU has fallen off the bus
//	92   high single-bit ECC error rate
//	94   contained ECC error (reset to remap the row)
//	95   uncontained ECC error
//	119  GSP RPC timeout
//	120  GSP error
//
// XIDs that an application's own faults cause leave the GPU Healthy and are
// not reported (ok is false):
//
//	13   graphics engine exception (illegal instruction, out-of-range access)
//	31   GPU memory page fault (illegal address)
//	43   GPU stopped processing (the faulting application's channel was reset)
//	45   preemptive cleanup after an earlier error (application ended)
//	68   video decoder (NVDEC) exception
//	109  context switch timeout (a kernel that would not yield)
//
// Any other XID is treated as Unhealthy, as NVIDIA's Kubernetes device plugin
// does: NVML reports only critical XIDs, and an unknown one is safer to act on.
func xidHealth(xid uint64) (health inventory.Health, reason string, ok bool) {
	switch xid {
	case 13, 31, 43, 45, 68, 109:
		return inventory.Healthy, "", false
	}
	what := "critical error"
	switch xid {
	case 48:
		what = "double-bit ECC error"
	case 62:
		what = "internal micro-controller halt"
	case 63:
		what = "ECC page retirement or row remapping recorded"
	case 64:
		what = "ECC page retirement or row remapping failed"
	case 74:
		what = "NVLink error"
	case 79:
		what = "GPU has fallen off the bus"
	case 92:
		what = "high single-bit ECC error rate"
	case 94:
		what = "contained ECC error"
	case 95:
		what = "uncontained ECC error"
	case 119:
		what = "GSP RPC timeout"
	case 120:
		what = "GSP error"
	}
	return inventory.Unhealthy, fmt.Sprintf("XID %d: %s", xid, what), true
}
