package setup

import (
	"fmt"

	"github.com/tessera-gpu/tessera/discovery"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/migctl"
)

// migManager marks the GPUs o.MIGManaged names as managed in node (so the
// published inventory says so) and builds the manager that creates and
// destroys their instances: through NVML on real GPUs (kept initialised
// until the returned close), through a simulated driver holding the
// configured instances on simulated ones. It returns nil when no GPU is
// managed.
func migManager(node *inventory.Node, measured bool, o Options) (*migctl.Manager, func(), error) {
	managed, err := discovery.MarkMIGManaged(node, o.Catalog, "--mig-managed", o.MIGManaged)
	if err != nil || len(managed) == 0 {
		return nil, func() {}, err
	}
	mgr, closeMIG, err := migctl.ForNode(*node, o.Catalog, !measured)
	if err != nil {
		return nil, nil, fmt.Errorf("--mig-managed %s: %w", o.MIGManaged, err)
	}
	o.Log.Info("managing the MIG layout of GPUs: instances are created and destroyed for containers", "gpus", managed, "simulated", !measured)
	return mgr, closeMIG, nil
}
