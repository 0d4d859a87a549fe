package nvmlgpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// unsupported reports whether ret means "this device or driver cannot tell":
// the field stays at its unknown value instead of failing discovery.
func unsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// absent reports whether ret means that an indexed thing (an NVLink, a MIG
// device slot, a MIG profile) does not exist, rather than that the call failed.
func absent(ret nvml.Return) bool {
	return unsupported(ret) || ret == nvml.ERROR_INVALID_ARGUMENT || ret == nvml.ERROR_NOT_FOUND
}

// gpuAt names a GPU by index for error messages.
func gpuAt(index int) string { return fmt.Sprintf("GPU %d", index) }

// callErr wraps a failed NVML call with the device it was made on; the
// nvml.Return stays reachable with errors.Is.
func callErr(where, call string, ret nvml.Return) error {
	return fmt.Errorf("%s: %s: %w", where, call, ret)
}

// get calls f and sorts the outcome: (value, true, nil) on success, (zero,
// false, nil) when the call is unsupported, else an error naming where and call.
func get[T any](where, call string, f func() (T, nvml.Return)) (T, bool, error) {
	v, ret := f()
	if ret == nvml.SUCCESS {
		return v, true, nil
	}
	var zero T
	if unsupported(ret) {
		return zero, false, nil
	}
	return zero, false, callErr(where, call, ret)
}
