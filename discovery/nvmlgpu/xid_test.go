package nvmlgpu

import (
	"testing"

	"github.com/tessera-gpu/tessera/inventory"
)

func TestXIDHealth(t *testing.T) {
	for _, code := range []uint64{48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 1234} {
		if h, reason, ok := xidHealth(code); !ok || h != inventory.Unhealthy || reason == "" {
			t.Errorf("xidHealth(%d) = %s %q %v, want Unhealthy", code, h, reason, ok)
		}
	}
	for _, code := range []uint64{13, 31, 43, 45, 68, 109} {
		if h, reason, ok := xidHealth(code); ok || h != inventory.Healthy || reason != "" {
			t.Errorf("xidHealth(%d) = %s %q %v, want not reported", code, h, reason, ok)
		}
	}
}
