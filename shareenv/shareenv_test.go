package shareenv

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/tessera-gpu/tessera/binding"
)

// TestLibraryReadsExactlyTheseVariables: the variables the interception
// library reads (every get("TESSERA_...") in intercept/src/config.c) are
// the ones Library lists, so neither side can rename one alone.
func TestLibraryReadsExactlyTheseVariables(t *testing.T) {
	src, err := os.ReadFile("../intercept/src/config.c")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`get\("(TESSERA_[A-Z_]+)"\)`).FindAllStringSubmatch(string(src), -1) {
		seen[m[1]] = true
	}
	var read []string
	for name := range seen {
		read = append(read, name)
	}
	sort.Strings(read)
	want := slices.Clone(Library())
	sort.Strings(want)
	if !slices.Equal(read, want) {
		t.Fatalf("intercept/src/config.c reads %v; Library() lists %v", read, want)
	}
	for _, name := range Library() {
		if name != LogLevel && !Owned(name) {
			t.Errorf("%s is read by the library but not Owned: a stale value from the starting environment would survive", name)
		}
	}
}

func TestVars(t *testing.T) {
	two := []binding.Share{
		{UUID: "GPU-b", Index: 1, ComputeMilli: 250, ComputeLimitMilli: 800, MemoryMiB: 1024, MemoryLimitMiB: 4096},
		{UUID: "GPU-a", Index: 0, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 81920, MemoryLimitMiB: 81920},
	}
	mig := []binding.Share{
		{UUID: "MIG-1", Index: 3, MIGProfile: "1g.10gb", ComputeMilli: 142, ComputeLimitMilli: 142, MemoryMiB: 9856, MemoryLimitMiB: 9856},
	}
	for _, tc := range []struct {
		name   string
		shares []binding.Share
		s      Settings
		want   map[string]string
		absent []string
	}{
		{
			name: "lists follow GPU index, not the order given", shares: two,
			s: Settings{ContainerID: "c1", ShmDir: "/run/tessera"},
			want: map[string]string{
				CUDAVisibleDevices: "GPU-a,GPU-b", GPUUUIDs: "GPU-a,GPU-b", CUDADeviceOrder: "PCI_BUS_ID",
				ComputeRequest: "1000m,250m", ComputeLimit: "1000m,800m",
				MemoryRequest: "81920Mi,1024Mi", MemoryLimit: "81920Mi,4096Mi",
				ContainerID: "c1", ShmDir: "/run/tessera", Oversubscribe: "0",
			},
			absent: []string{ArbiterRegion, ArbiterSocket, ComputeFail, MIGProfiles, MIGParentUUIDs, LogLevel},
		},
		{
			name: "arbiter, fail closed, oversubscribed", shares: two[:1],
			s: Settings{ContainerID: "c2", ShmDir: "/s", ArbiterRegion: "/r/grant", ArbiterSocket: "/r/a.sock", ComputeFail: "closed", Oversubscribe: true},
			want: map[string]string{
				ArbiterRegion: "/r/grant", ArbiterSocket: "/r/a.sock", ComputeFail: "closed", Oversubscribe: "1",
				CUDAVisibleDevices: "GPU-b",
			},
		},
		{
			name: "MIG instance with its parent", shares: mig,
			s:    Settings{ContainerID: "c3", ShmDir: "/s", MIGParents: map[int]string{3: "GPU-parent"}},
			want: map[string]string{MIGProfiles: "1g.10gb", MIGParentUUIDs: "GPU-parent", CUDAVisibleDevices: "MIG-1"},
		},
		{
			name: "MIG instance, parents unknown", shares: mig,
			s:      Settings{ContainerID: "c4", ShmDir: "/s"},
			want:   map[string]string{MIGProfiles: "1g.10gb"},
			absent: []string{MIGParentUUIDs},
		},
		{
			name: "no shares: nothing visible", s: Settings{ContainerID: "c5", ShmDir: "/s"},
			want: map[string]string{CUDAVisibleDevices: "", GPUUUIDs: "", MemoryLimit: ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Vars(tc.shares, tc.s)
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %q (set: %v), want %q", k, g, ok, v)
				}
			}
			for _, k := range tc.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s = %q, want it unset", k, v)
				}
			}
			for k := range got {
				if !Owned(k) {
					t.Errorf("Vars set %s, which Owned does not claim", k)
				}
			}
		})
	}
}

func TestOwned(t *testing.T) {
	for name, want := range map[string]bool{
		MemoryLimit: true, ArbiterSocket: true, CUDAVisibleDevices: true, MIGParentUUIDs: true,
		LogLevel: false, "TESSERA_TOKEN": false, "PATH": false, "NVIDIA_VISIBLE_DEVICES": false,
	} {
		if got := Owned(name); got != want {
			t.Errorf("Owned(%s) = %v, want %v", name, got, want)
		}
	}
	if Owned(JobID) || Owned(Queue) {
		t.Errorf("%s and %s: the host daemon sets them itself; Owned must not claim them", JobID, Queue)
	}
}
