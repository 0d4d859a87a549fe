package migctl

import (
	"fmt"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/catalog"
)

// Open finds through lib (initialised by the caller, and kept so while
// the GPUs are used) each GPU of specs, by UUID, with its model's MIG
// geometry, for NewManager. A GPU that NVML does not know, or that is not
// in MIG mode now, is refused: Tessera never switches MIG mode, the
// operator does.
func Open(lib nvml.Interface, specs map[string]*catalog.MIGSpec) ([]GPU, error) {
	var out []GPU
	for _, uuid := range sortedSpecKeys(specs) {
		spec := specs[uuid]
		if spec == nil {
			return nil, fmt.Errorf("GPU %s: no MIG geometry in the catalog for its model", uuid)
		}
		dev, ret := lib.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %s: %w", uuid, call("DeviceGetHandleByUUID", ret))
		}
		current, _, ret := dev.GetMigMode()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %s: %w", uuid, call("GetMigMode", ret))
		}
		if current != nvml.DEVICE_MIG_ENABLE {
			return nil, fmt.Errorf("GPU %s: not in MIG mode (Tessera never switches MIG mode; the operator enables it, e.g. nvidia-smi -i %s -mig 1)", uuid, uuid)
		}
		out = append(out, GPU{UUID: uuid, Device: dev, Spec: spec})
	}
	return out, nil
}

func sortedSpecKeys(m map[string]*catalog.MIGSpec) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
