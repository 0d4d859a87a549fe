package catalog

import (
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Profile memory must be within this fraction of the model's memory times
// memorySlices/totalMemorySlices. MIG reserves part of every memory slice for
// the instance's own use, so a profile gets a little less than its share:
// 91-99% in every nvidia-smi listing the table was built from (the smallest
// ratio is H200's 1g.18gb, 16384 MiB of a 17971 MiB share). The lower bound
// leaves room for a few percent of driver variation; a profile can never get
// more than its share.
const (
	minMIGMemoryShare = 0.88
	maxMIGMemoryShare = 1.0
)

func TestMIGProfilesConsistent(t *testing.T) {
	// The form nvidia-smi gives GPU-instance profiles: "<compute
	// slices>g.<memory>gb", optionally with the media-extension suffix.
	migProfileName := regexp.MustCompile(`^([1-9][0-9]*)g\.([1-9][0-9]*)gb(\+me)?$`)
	for _, m := range Default().Models() {
		if m.MIG == nil {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			spec := m.MIG
			if spec.ComputeSlices <= 0 || spec.MemorySlices <= 0 {
				t.Fatalf("MIG geometry %d compute / %d memory slices", spec.ComputeSlices, spec.MemorySlices)
			}
			if len(spec.Profiles) == 0 {
				t.Fatal("MIG spec has no profiles")
			}
			if !m.SupportsMIG() {
				t.Error("SupportsMIG() = false for a model with profiles")
			}
			seen := map[string]bool{}
			full := false
			for _, p := range spec.Profiles {
				match := migProfileName.FindStringSubmatch(p.Name)
				if match == nil {
					t.Errorf("%s: name is not <N>g.<M>gb[+me]", p.Name)
					continue
				}
				if n, _ := strconv.Atoi(match[1]); n != p.ComputeSlices {
					t.Errorf("%s: name says %d compute slices, ComputeSlices = %d", p.Name, n, p.ComputeSlices)
				}
				if k := normalize(p.Name); seen[k] {
					t.Errorf("%s: duplicate profile name", p.Name)
				} else {
					seen[k] = true
				}
				if got, ok := m.MIGProfile(p.Name); !ok || !reflect.DeepEqual(got, p) {
					t.Errorf("%s: MIGProfile lookup = %+v, %v", p.Name, got, ok)
				}
				if len(p.Starts) == 0 || !sort.IntsAreSorted(p.Starts) {
					t.Errorf("%s: starts %v, want at least one, ascending", p.Name, p.Starts)
				}
				for _, st := range p.Starts {
					if st < 0 || st+p.MemorySlices > spec.MemorySlices {
						t.Errorf("%s: start %d with size %d leaves the GPU's %d memory slices", p.Name, st, p.MemorySlices, spec.MemorySlices)
					}
				}
				if spec.ProfileIndex(p.Name) < 0 {
					t.Errorf("%s: ProfileIndex = -1", p.Name)
				}
				if p.ComputeSlices < 1 || p.ComputeSlices > spec.ComputeSlices {
					t.Errorf("%s: %d compute slices, GPU has %d", p.Name, p.ComputeSlices, spec.ComputeSlices)
				}
				if p.MemorySlices < 1 || p.MemorySlices > spec.MemorySlices {
					t.Errorf("%s: %d memory slices, GPU has %d", p.Name, p.MemorySlices, spec.MemorySlices)
				}
				if p.MaxInstances < 1 ||
					p.MaxInstances*p.ComputeSlices > spec.ComputeSlices ||
					p.MaxInstances*p.MemorySlices > spec.MemorySlices {
					t.Errorf("%s: %d instances do not fit %d/%d slices", p.Name, p.MaxInstances, spec.ComputeSlices, spec.MemorySlices)
				}
				if p.SMCount < 1 || p.SMCount > m.SMCount {
					t.Errorf("%s: %d SMs, model has %d", p.Name, p.SMCount, m.SMCount)
				}
				if p.MemoryMiB > m.MemoryMiB {
					t.Errorf("%s: %d MiB, model has %d", p.Name, p.MemoryMiB, m.MemoryMiB)
				}
				share := float64(m.MemoryMiB) * float64(p.MemorySlices) / float64(spec.MemorySlices)
				if r := float64(p.MemoryMiB) / share; r < minMIGMemoryShare || r > maxMIGMemoryShare {
					t.Errorf("%s: %d MiB is %.3f of its %d/%d share (%.0f MiB); want %.2f..%.2f",
						p.Name, p.MemoryMiB, r, p.MemorySlices, spec.MemorySlices, share, minMIGMemoryShare, maxMIGMemoryShare)
				}
				if p.ComputeSlices == spec.ComputeSlices {
					full = true
				}
			}
			if !full {
				t.Errorf("no profile uses all %d compute slices", spec.ComputeSlices)
			}
		})
	}
}

func TestModelsWellFormed(t *testing.T) {
	computeCapability := regexp.MustCompile(`^[0-9]+\.[0-9]$`)
	amdTarget := regexp.MustCompile(`^gfx[0-9a-f]+$`)
	for _, m := range Default().Models() {
		t.Run(m.Name, func(t *testing.T) {
			if m.Name == "" || m.Family == "" || m.Architecture == "" {
				t.Errorf("empty name, family or architecture: %+v", m)
			}
			if m.MemoryMiB <= 0 || m.SMCount <= 0 {
				t.Errorf("MemoryMiB = %d, SMCount = %d", m.MemoryMiB, m.SMCount)
			}
			if m.PCIeGeneration < 3 || m.PCIeGeneration > 6 {
				t.Errorf("PCIeGeneration = %d, want 3..6", m.PCIeGeneration)
			}
			if m.NVLinks < 0 || (m.NVLinks > 0) != (m.NVLinkGeneration > 0) {
				t.Errorf("NVLinks = %d with NVLinkGeneration = %d", m.NVLinks, m.NVLinkGeneration)
			}
			switch m.Vendor {
			case NVIDIA:
				if !computeCapability.MatchString(m.ComputeCapability) {
					t.Errorf("ComputeCapability = %q, want d.d", m.ComputeCapability)
				}
			case AMD:
				if !amdTarget.MatchString(m.ComputeCapability) {
					t.Errorf("ComputeCapability = %q, want a gfx target", m.ComputeCapability)
				}
				if m.MIG != nil {
					t.Error("AMD model with NVIDIA MIG geometry")
				}
			case Intel:
				if m.ComputeCapability != "" || m.MIG != nil {
					t.Errorf("Intel model with compute capability %q or MIG", m.ComputeCapability)
				}
			default:
				t.Errorf("unknown vendor %q", m.Vendor)
			}
			// An alias that normalizes to the model's own name or to another of
			// its aliases adds nothing; New accepts it, the table should not.
			seen := map[string]bool{normalize(m.Name): true}
			for _, a := range m.Aliases {
				k := normalize(a)
				if seen[k] {
					t.Errorf("alias %q repeats the name or another alias", a)
				}
				seen[k] = true
			}
		})
	}
}

func TestTableShape(t *testing.T) {
	c := Default()
	all := c.Models()
	if len(all) != 25 {
		t.Errorf("%d models, want 25", len(all))
	}

	var common []string
	for _, m := range c.Common() {
		common = append(common, m.Name)
	}
	want := "A100-40GB A100-80GB A10G B200 H100-SXM H200 L4 L40S T4"
	if got := strings.Join(common, " "); got != want {
		t.Errorf("Common() = %s, want %s", got, want)
	}
	if len(common) >= len(all) {
		t.Errorf("Common() has %d models, Models() %d", len(common), len(all))
	}

	families := []struct {
		filter string
		want   string
	}{
		{"H100", "H100-NVL H100-PCIe H100-SXM"},
		{"A100", "A100-40GB A100-80GB"},
		{"V100", "V100-16GB V100-32GB"},
		{"H200", "H200 H200-NVL"},
		{"nvidia h200", "H200 H200-NVL"},
		{"a10", "A10"},
		{"A10G", "A10G"},
		{"L4", "L4"},
		{"H20", "H20"},
		{"H100-PCIe", "H100-PCIe"},
		{"NVIDIA H100 NVL", "H100-NVL"},
		{"MI300X", "MI300X"},
		{"zzz", ""},
	}
	for _, tc := range families {
		var got []string
		for _, m := range c.Match(tc.filter) {
			got = append(got, m.Name)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("Match(%q) = [%s], want [%s]", tc.filter, g, tc.want)
		}
	}
}

func TestLookupAndResolve(t *testing.T) {
	c := Default()
	cases := []struct {
		name string
		want string // "" means no model
	}{
		{"h200", "H200"},
		{"H200", "H200"},
		{"NVIDIA H200", "H200"},
		{"H200-SXM-141GB", "H200"},
		{"h200 sxm 141gb", "H200"},
		{"NVIDIA H200 NVL", "H200-NVL"},
		{"nvidia h100 80gb hbm3", "H100-SXM"},
		{"H100", "H100-SXM"},
		{"H100-SXM5-80GB", "H100-SXM"},
		{"NVIDIA H100 PCIe", "H100-PCIe"},
		{"A100-SXM4-80GB", "A100-80GB"},
		{"NVIDIA A100 80GB PCIe", "A100-80GB"},
		{"NVIDIA A100-SXM4-40GB", "A100-40GB"},
		{"A100-SXM4-40GB", "A100-40GB"}, // R450 drivers printed no vendor
		{"V100M32", "V100-32GB"},
		{"v100m16", "V100-16GB"},
		{"Tesla V100-PCIE-16GB", "V100-16GB"},
		{"Tesla T4", "T4"},
		{"tesla t4", "T4"},
		{"NVIDIA GH200 480GB", "GH200"},
		{"NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"},
		{"NVIDIA GeForce RTX 4090", "RTX-4090"},
		{"AMD Instinct MI300X", "MI300X"},
		{"Instinct MI250X", "MI250X"},
		{"Intel Gaudi 3", "Gaudi3"},
		{"A100", ""}, // a family, not a model
		{"H2000", ""},
		{"zzz", ""},
		{"", ""},
		{"---", ""},
	}
	for _, tc := range cases {
		m, ok := c.Lookup(tc.name)
		if got := map[bool]string{true: m.Name}[ok]; got != tc.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tc.name, m.Name, ok, tc.want)
		}
		rm, err := c.Resolve(tc.name)
		if (err == nil) != (tc.want != "") || rm.Name != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.name, rm.Name, err, tc.want)
		}
	}
}

func TestResolveSuggests(t *testing.T) {
	c := Default()
	_, err := c.Resolve("H2000")
	if err == nil || !strings.Contains(err.Error(), "did you mean H200,") {
		t.Errorf("Resolve(H2000) error = %v, want H200 suggested first", err)
	}
	// H200 and H20 are both contained in "H2000"; H200 is one edit away, H20 two.
	if s := c.Suggest("H2000", 3); len(s) == 0 || s[0] != "H200" || !contains(s, "H20") {
		t.Errorf("Suggest(H2000) = %v, want H200 first, then H20", s)
	}
	if s := c.Suggest("L40", 3); len(s) == 0 || s[0] != "L40" {
		t.Errorf("Suggest(L40) = %v, want L40 first", s)
	}
	// Nothing close: an error that points at the full list, and no panic.
	_, err = c.Resolve("zzz")
	if err == nil || !strings.Contains(err.Error(), "zzz") {
		t.Errorf("Resolve(zzz) error = %v", err)
	}
	if _, err := c.MatchOrError("H2000"); err == nil {
		t.Error("MatchOrError(H2000) succeeded")
	}
	if s := c.Suggest("", 3); s != nil {
		t.Errorf("Suggest(\"\") = %v", s)
	}
}

func TestNewRejectsDuplicates(t *testing.T) {
	base := Model{Vendor: NVIDIA, Name: "X1", Architecture: "Hopper", MemoryMiB: 1, SMCount: 1, PCIeGeneration: 5}
	other := base
	other.Name = "X2"
	cases := []struct {
		name string
		a, b []string
	}{
		{"alias vs alias", []string{"Foo-1"}, []string{"foo 1"}},
		{"alias vs name", []string{"x-2"}, nil},
		{"name vs name", nil, []string{"X1"}},
	}
	for _, tc := range cases {
		a, b := base, other
		a.Aliases, b.Aliases = tc.a, tc.b
		if tc.name == "name vs name" {
			b.Name = "x 1"
		}
		if _, err := New([]Model{a, b}); err == nil {
			t.Errorf("%s: New accepted %v and %v", tc.name, a, b)
		}
	}
	if _, err := New([]Model{base, other}); err != nil {
		t.Errorf("New rejected distinct models: %v", err)
	}
	if _, err := New(builtinModels()); err != nil {
		t.Errorf("built-in table: %v", err)
	}
}

func TestBuiltinTableIsFresh(t *testing.T) {
	a := builtinModels()
	a[0].Name = "changed"
	a[0].Aliases[0] = "changed"
	a[0].MIG.Profiles[0].SMCount = -1
	b := builtinModels()
	if b[0].Name == "changed" || b[0].Aliases[0] == "changed" || b[0].MIG.Profiles[0].SMCount == -1 {
		t.Error("builtinModels returns shared data")
	}
}

// nvmlMockProductNames are the product names go-nvml v0.13.4-1's mock servers
// report (pkg/nvml/mock/gpus/*.go; dgxa100, dgxh100, dgxh200 and dgxb200 use
// A100_SXM4_40GB, H100_SXM5_80GB, H200_SXM5_141GB and B200_SXM5_180GB). When
// cgo is available, nvmlmock_test.go checks this list against the mocks.
func nvmlMockProductNames() map[string]string {
	return map[string]string{
		"Mock NVIDIA A100-SXM4-40GB": "A100-40GB", // gpus.A100_SXM4_40GB, dgxa100
		"NVIDIA A100-PCIE-40GB":      "A100-40GB",
		"NVIDIA A100-PCIE-80GB":      "A100-80GB",
		"NVIDIA A100-SXM4-80GB":      "A100-80GB",
		"NVIDIA A30-PCIE-24GB":       "A30",
		"NVIDIA H100 80GB HBM3":      "H100-SXM", // dgxh100
		"NVIDIA H200 141GB HBM3e":    "H200",     // dgxh200
		"NVIDIA B200 180GB HBM3e":    "B200",     // dgxb200
	}
}

func TestNVMLMockNamesResolve(t *testing.T) {
	c := Default()
	for name, want := range nvmlMockProductNames() {
		m, err := c.Resolve(name)
		if err != nil || m.Name != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", name, m.Name, err, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
