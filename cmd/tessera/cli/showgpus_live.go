package cli

import (
	"context"
	"math"
	"os"
	"time"

	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/inventory"
)

// daemonStatus asks the host daemon that h locates for its status, briefly:
// ok is false when no daemon answers (show-gpus works without one).
func (a *app) daemonStatus(ctx context.Context, h *hostFlags) (api.Status, string, bool) {
	_, socket, err := h.resolve()
	if err != nil {
		return api.Status{}, "", false
	}
	if addr, err := h.address(); err != nil || addr == "" {
		if _, err := os.Stat(socket); err != nil {
			return api.Status{}, "", false
		}
	}
	c, err := a.hostClient(h)
	if err != nil {
		a.log.Debug("no host daemon to ask; free capacity is the devices' own", "err", err)
		return api.Status{}, "", false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		a.log.Debug("no host daemon answered; free capacity is the devices' own", "daemon", c.Where(), "err", err)
		return api.Status{}, "", false
	}
	return st, c.Where(), true
}

// overlayBookings sets, on every GPU the daemon manages (matched by UUID),
// the compute share its jobs hold, and returns how many GPUs matched.
func overlayBookings(st api.Status, nodes []inventory.Node) int {
	free := make(map[string]float64, len(st.GPUs))
	for _, g := range st.GPUs {
		free[g.UUID] = g.FreeFraction
	}
	matched := 0
	for i := range nodes {
		for j := range nodes[i].GPUs {
			g := &nodes[i].GPUs[j]
			if f, ok := free[g.UUID]; ok {
				g.AllocatedMilli = int64(math.Round((1 - f) * 1000))
				matched++
			}
		}
	}
	return matched
}

// daemonUse is each GPU's use from the daemon's status, by UUID. A GPU
// the daemon lists without use (a daemon from before use was reported)
// is not metered, and says so.
func daemonUse(st api.Status) map[string]gpuuse.Use {
	use := make(map[string]gpuuse.Use, len(st.GPUs))
	for _, g := range st.GPUs {
		if g.Use != nil {
			use[g.UUID] = *g.Use
		} else {
			use[g.UUID] = gpuuse.NotMetered("the host daemon does not report use (upgrade it)")
		}
	}
	return use
}
