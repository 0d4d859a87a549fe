package handoff

import (
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/binding"
)

func share(uuid string, compute int64) binding.Share {
	return binding.Share{UUID: uuid, ComputeMilli: compute, ComputeLimitMilli: compute, MemoryMiB: 100, MemoryLimitMiB: 200}
}

func pod(name string, age int, gpus ...binding.Share) Pod {
	a, err := binding.Encode(binding.Assignment{Node: "n", Containers: []binding.Container{{Name: "c", GPUs: gpus}}})
	if err != nil {
		panic(err)
	}
	return Pod{Namespace: "ns", Name: name, UID: "uid-" + name, Created: time.Unix(int64(age), 0),
		Containers: []ContainerRequest{{Name: "c", Devices: len(gpus)}}, Assignment: a, HasAssignment: true}
}

func none(Allocated) bool { return false }

func TestResolve(t *testing.T) {
	a, b := pod("a", 1, share("GPU-0", 100)), pod("b", 2, share("GPU-1", 200))
	twin := pod("twin", 3, share("GPU-0", 100))
	two := pod("two", 4, share("GPU-0", 100), share("GPU-1", 100))
	dev0, dev1 := []string{SlotID("GPU-0", 3)}, []string{SlotID("GPU-1", 0)}
	for _, tc := range []struct {
		name      string
		pods      []Pod
		done      func(Allocated) bool
		admitting map[PodRef]bool
		devices   []string
		want      string
		ambiguous bool
		wantErr   string
	}{
		{name: "kubelet names the pod", pods: []Pod{a, b}, admitting: map[PodRef]bool{b.Ref(): true}, devices: dev0, want: "b"},
		{name: "only one waits", pods: []Pod{a, b}, done: func(x Allocated) bool { return x.Pod.Name == "a" }, devices: dev0, want: "b"},
		{name: "count narrows", pods: []Pod{a, two}, devices: []string{SlotID("GPU-0", 1), SlotID("GPU-1", 1)}, want: "two"},
		{name: "device GPUs narrow", pods: []Pod{a, b}, devices: dev1, want: "b"},
		{name: "identical twins: oldest, ambiguous", pods: []Pod{twin, a}, devices: dev0, want: "a", ambiguous: true},
		{name: "different shares on the same GPUs fail", pods: []Pod{a, pod("c", 5, share("GPU-0", 300))}, devices: dev0, wantErr: "cannot tell which"},
		{name: "nobody waits", pods: []Pod{a}, done: func(Allocated) bool { return true }, devices: dev0, wantErr: "no pod bound to node n is waiting"},
		{name: "terminal pods are skipped", pods: []Pod{func() Pod { p := a; p.Terminal = true; return p }()}, devices: dev0, wantErr: "no pod"},
		{name: "missing assignment", pods: []Pod{{Namespace: "ns", Name: "x", Containers: []ContainerRequest{{Name: "c", Devices: 1}}}}, devices: dev0, wantErr: "annotation tessera.io/assignment is missing"},
		{name: "count mismatch", pods: []Pod{func() Pod { p := a; p.Containers[0].Devices = 1; p.Assignment = two.Assignment; return p }()}, devices: dev0, wantErr: "gives it 2 GPU(s), but it requests 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := tc.done
			if done == nil {
				done = none
			}
			got, err := Resolve("n", tc.pods, done, tc.admitting, tc.devices)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Pod.Name != tc.want || got.Ambiguous != tc.ambiguous {
				t.Errorf("got %s (ambiguous %v), want %s (ambiguous %v)", got.Pod.Name, got.Ambiguous, tc.want, tc.ambiguous)
			}
		})
	}
}

func TestSlotsRoundTripAndBounds(t *testing.T) {
	ids, err := Slots([]string{"GPU-a", "MIG-b"}, 3)
	if err != nil || len(ids) != 6 {
		t.Fatalf("Slots = %v, %v", ids, err)
	}
	u, k, err := ParseSlot(ids[4])
	if err != nil || u != "MIG-b" || k != 1 {
		t.Errorf("ParseSlot(%s) = %s %d %v", ids[4], u, k, err)
	}
	for _, bad := range []string{"GPU-a", "::s1", "GPU-a::sx", "GPU-a::s1000"} {
		if _, _, err := ParseSlot(bad); err == nil {
			t.Errorf("ParseSlot(%q) accepted", bad)
		}
	}
	if _, err := Slots([]string{"x"}, 0); err == nil || !strings.Contains(err.Error(), "[1, 1000]") {
		t.Errorf("Slots(0) error = %v", err)
	}
}

func TestPreferTakesOneFreeSlotPerAssignedGPU(t *testing.T) {
	avail := []string{SlotID("A", 2), SlotID("A", 1), SlotID("B", 5), SlotID("C", 0)}
	got := Prefer(avail, nil, []string{"B", "A"}, 2)
	if strings.Join(got, ",") != SlotID("B", 5)+","+SlotID("A", 1) {
		t.Errorf("Prefer = %v", got)
	}
	if got := Prefer(avail, nil, []string{"D"}, 1); got != nil {
		t.Errorf("Prefer on a full GPU = %v, want nil", got)
	}
}

func TestBuildListsDevicesInIndexOrder(t *testing.T) {
	b, a := share("GPU-b", 250), share("GPU-a", 500)
	b.Index, a.Index = 5, 2
	h := Build(Paths{HostStateRoot: "/run/t", CDI: true}, "tsr-1", []binding.Share{b, a})
	if h.Env["CUDA_VISIBLE_DEVICES"] != "GPU-a,GPU-b" || h.Env["TESSERA_COMPUTE_REQUEST"] != "500m,250m" || h.Env["TESSERA_MEMORY_LIMIT"] != "200Mi,200Mi" {
		t.Errorf("env = %v", h.Env)
	}
	if h.Env["NVIDIA_VISIBLE_DEVICES"] != "void" || strings.Join(h.CDIDevices, ",") != "nvidia.com/gpu=GPU-a,nvidia.com/gpu=GPU-b" {
		t.Errorf("CDI = %v, NVIDIA_VISIBLE_DEVICES = %q", h.CDIDevices, h.Env["NVIDIA_VISIBLE_DEVICES"])
	}
	if _, ok := h.Env["LD_PRELOAD"]; ok {
		t.Errorf("LD_PRELOAD set without a library")
	}
}

// TestBuildNamesTheMIGProfile: a container given a MIG instance learns its
// profile, as a host job does (one contract, package shareenv).
func TestBuildNamesTheMIGProfile(t *testing.T) {
	g := share("MIG-7", 142)
	g.MIGProfile = "1g.10gb"
	h := Build(Paths{HostStateRoot: "/run/t"}, "tsr-2", []binding.Share{g})
	if h.Env["TESSERA_MIG_PROFILES"] != "1g.10gb" || h.Env["CUDA_VISIBLE_DEVICES"] != "MIG-7" {
		t.Errorf("env = %v", h.Env)
	}
	if h := Build(Paths{HostStateRoot: "/run/t"}, "tsr-3", []binding.Share{share("GPU-a", 500)}); h.Env["TESSERA_MIG_PROFILES"] != "" {
		t.Errorf("a GPU share got TESSERA_MIG_PROFILES=%q", h.Env["TESSERA_MIG_PROFILES"])
	}
}

func TestKeyIsStableAndValid(t *testing.T) {
	k1 := Key([]string{"b", "a"}, "uid", "c")
	if k1 != Key([]string{"a", "b"}, "uid", "c") || k1 == Key([]string{"a", "b"}, "uid2", "c") {
		t.Errorf("key not a function of the device set and identity")
	}
	if len(k1) > 128 || strings.Trim(k1, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		t.Errorf("key %q breaks the container ID rule", k1)
	}
}

func TestAddMPSMountsThePipeFolderAtItsHostPath(t *testing.T) {
	h := Build(Paths{HostStateRoot: "/run/t"}, "tsr-1", []binding.Share{share("GPU-a", 450)})
	before := len(h.Mounts)
	env := map[string]string{EnvMPSPipeDir: "/run/tessera/mps/GPU-a/pipe", EnvMPSThreadPercentage: "45", EnvMPSPinnedMemLimit: "0=200M"}
	if err := h.AddMPS(env); err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		if h.Env[k] != v {
			t.Errorf("%s = %q, want %q", k, h.Env[k], v)
		}
	}
	if h.Env["TESSERA_CONTAINER_ID"] != "tsr-1" {
		t.Errorf("the usual variables were lost: %v", h.Env)
	}
	if len(h.Mounts) != before+1 || h.Mounts[before] != (Mount{HostPath: env[EnvMPSPipeDir], ContainerPath: env[EnvMPSPipeDir]}) {
		t.Errorf("mounts = %+v, want the pipe folder read-write at its host path", h.Mounts)
	}

	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvMPSThreadPercentage: "45"}, `CUDA_MPS_PIPE_DIRECTORY: must be an absolute path, got ""`},
		{map[string]string{EnvMPSPipeDir: "pipe"}, `CUDA_MPS_PIPE_DIRECTORY: must be an absolute path, got "pipe"`},
		{map[string]string{EnvMPSPipeDir: "/p", "LD_PRELOAD": "/x.so"}, "LD_PRELOAD: not an MPS client variable"},
	} {
		h := Build(Paths{HostStateRoot: "/run/t"}, "tsr-1", []binding.Share{share("GPU-a", 450)})
		n := len(h.Mounts)
		err := h.AddMPS(tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddMPS(%v): %v, want %q", tc.env, err, tc.want)
		}
		if len(h.Mounts) != n || h.Env[EnvMPSPipeDir] != "" {
			t.Errorf("AddMPS(%v) failed but changed the handoff: %+v", tc.env, h)
		}
	}
}
