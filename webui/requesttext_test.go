package webui

import (
	"testing"

	"github.com/tessera-gpu/tessera/request"
)

func TestRequestText(t *testing.T) {
	for _, tc := range []struct {
		g    request.GPU
		want string
	}{
		{request.GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000}, "1 GPU"},
		{request.GPU{Count: 2, ComputeMilli: 500, ComputeLimitMilli: 800, MemoryMiB: 20480, MemoryLimitMiB: 40960}, "2x 0.5 GPU (limit 0.8) 20Gi (cap 40Gi)"},
		{request.GPU{Count: 1, MemoryMiB: 10240}, "1 GPU 10Gi"},
		{request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, Models: []string{"H200", "H100"}}, "1x 0.25 GPU of H200|H100"},
		{request.GPU{Count: 2, MIGProfile: "1g.18gb"}, "2x MIG 1g.18gb"},
	} {
		if got := RequestText(tc.g); got != tc.want {
			t.Errorf("RequestText(%+v) = %q, want %q", tc.g, got, tc.want)
		}
	}
}
