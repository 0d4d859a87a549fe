package request

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
)

func TestParseValid(t *testing.T) {
	cat := catalogtest.Small()
	tests := []struct {
		name string
		in   map[string]string
		want GPU
	}{
		{"whole GPU by default", map[string]string{"count": "2"},
			GPU{Count: 2, ComputeMilli: 1000, ComputeLimitMilli: 1000}},
		{"fraction with burst", map[string]string{"compute": "0.25", "compute-limit": "0.8"},
			GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 800}},
		{"memory percentage apart from compute", map[string]string{"compute": "0.5", "memory": "25%"},
			GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500, MemoryShareMilli: 250}},
		{"percent and memory", map[string]string{"compute": "25%", "memory": "20Gi", "memory-limit": "30Gi"},
			GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250, MemoryMiB: 20480, MemoryLimitMiB: 30720}},
		{"milli share", map[string]string{"compute": "500m"},
			GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500}},
		{"exclusive", map[string]string{"count": "1", "exclusive": "TRUE"},
			GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, Exclusive: true}},
		{"family expands to members", map[string]string{"model": "h100"},
			GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, Models: []string{"H100-PCIe", "H100-SXM"}}},
		{"alias list", map[string]string{"model": "NVIDIA H200|L4"},
			GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, Models: []string{"H200", "L4"}}},
		{"mig profile", map[string]string{"mig-profile": "1g.18gb", "count": "3"},
			GPU{Count: 3, ComputeMilli: 1000, ComputeLimitMilli: 1000, MIGProfile: "1g.18gb"}},
		{"memory-only share", map[string]string{"memory": "20Gi"},
			GPU{Count: 1, MemoryMiB: 20480}},
		{"memory-only share with burst", map[string]string{"memory": "20Gi", "memory-limit": "40Gi", "compute-limit": "1"},
			GPU{Count: 1, ComputeLimitMilli: 1000, MemoryMiB: 20480, MemoryLimitMiB: 40960}},
		{"memory limit as a share of the GPU (nvshare's whole card)", map[string]string{"compute": "0.1", "compute-limit": "1", "memory-limit": "100%"},
			GPU{Count: 1, ComputeMilli: 100, ComputeLimitMilli: 1000, MemoryLimitShareMilli: 1000}},
		{"memory and its limit as shares", map[string]string{"compute": "0.2", "memory": "25%", "memory-limit": "50%"},
			GPU{Count: 1, ComputeMilli: 200, ComputeLimitMilli: 200, MemoryShareMilli: 250, MemoryLimitShareMilli: 500}},
		{"memory equal to the model", map[string]string{"compute": "1", "memory": "143771Mi", "model": "H200"},
			GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, MemoryMiB: 143771, Models: []string{"H200"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in, cat)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestParseInvalid lists bad inputs with the message each must produce: the
// field's name and its allowed range.
func TestParseInvalid(t *testing.T) {
	cat := catalogtest.Small()
	tests := []struct {
		in   map[string]string
		want string
	}{
		{map[string]string{}, "empty GPU request"},
		{map[string]string{"gpus": "1"}, `gpus: must be one of the fields count, compute,`},
		{map[string]string{"count": "0"}, `count: must be a whole number in [1, 16], got "0"`},
		{map[string]string{"count": "-1"}, `count: must be a whole number in [1, 16], got "-1"`},
		{map[string]string{"count": "17"}, `count: must be a whole number in [1, 16], got "17"`},
		{map[string]string{"count": "two"}, `count: must be a whole number in [1, 16], got "two"`},
		{map[string]string{"count": "1.5"}, `count: must be a whole number in [1, 16], got "1.5"`},
		{map[string]string{"count": ""}, `count: must be a whole number in [1, 16], got ""`},
		{map[string]string{"memory": "25%"}, `compute: must be set when memory is a percentage of the GPU's memory`},
		{map[string]string{"compute": "0.5", "memory": "150%"}, `memory: must be a size such as 20Gi, or a percentage of the GPU's memory in (0%, 100%] such as 25%, got "150%"`},
		{map[string]string{"compute": "0.5", "memory": "25%", "memory-limit": "10Gi"}, `memory-limit: must be empty when memory is a share of the GPU's memory`},
		{map[string]string{"memory": "25%", "mig-profile": "1g.10gb", "compute": "1"}, `mig-profile: must be empty when memory or memory-limit is set`},
		{map[string]string{"memory-limit": "100%"}, `compute: must be set when memory-limit is a percentage of the GPU's memory`},
		{map[string]string{"compute": "0.5", "memory-limit": "150%"}, `memory-limit: must be a size such as 20Gi, or a percentage of the GPU's memory in (0%, 100%] such as 100%, got "150%"`},
		{map[string]string{"compute": "0.5", "memory-limit": "25%"}, `memory-limit: must be a share of at least 0.5 of the GPU's memory (the guaranteed memory's share), got "0.25 of the GPU"`},
		{map[string]string{"compute": "0.5", "memory": "50%", "memory-limit": "25%"}, `memory-limit: must be a share of at least 0.5 of the GPU's memory`},
		{map[string]string{"compute": "0.5", "memory": "20Gi", "memory-limit": "100%"}, `memory-limit: must be a size when memory is a size (20Gi), not a share of the GPU's memory, got "1 of the GPU"`},
		{map[string]string{"mig-profile": "1g.18gb", "compute": "1", "memory-limit": "100%"}, `mig-profile: must be empty when memory or memory-limit is set`},
		{map[string]string{"compute": "1.5"}, `compute: must be a share in (0, 1], written 0.25, 25% or 250m, at most a thousandth fine, got "1.5"`},
		{map[string]string{"compute": "0"}, `compute: must be a share in (0, 1]`},
		{map[string]string{"compute": "-0.25"}, `compute: must be a share in (0, 1], written 0.25, 25% or 250m, at most a thousandth fine, got "-0.25"`},
		{map[string]string{"compute": "abc"}, `compute: must be a share in (0, 1]`},
		{map[string]string{"compute": "150%"}, `compute: must be a share in (0, 1]`},
		{map[string]string{"compute": "0.0001"}, `compute: must be a share in (0, 1], written 0.25, 25% or 250m, at most a thousandth fine, got "0.0001"`},
		{map[string]string{"compute": "NaN"}, `compute: must be a share in (0, 1]`},
		{map[string]string{"compute": "0.5", "compute-limit": "0.25"}, `compute-limit: must be in [0.5, 1] (at least compute, the guaranteed compute), got "0.25"`},
		{map[string]string{"compute": "0.5", "compute-limit": "1.2"}, `compute-limit: must be a share in (0, 1]`},
		{map[string]string{"compute-limit": "0.8"}, `compute-limit: must be in [1, 1] (at least compute, the guaranteed compute), got "0.8"`},
		{map[string]string{"memory-limit": "20Gi"}, `memory: must be set when memory-limit is set without compute: a size such as 20Gi, got ""`},
		{map[string]string{"memory": "20Gi", "exclusive": "true"}, `exclusive: must be false when compute is below 1`},
		{map[string]string{"compute": "0.5", "memory": "20GB"}, `memory: must be a size such as 20Gi or 512Mi (invalid quantity "20GB": unknown unit "GB"`},
		{map[string]string{"compute": "0.5", "memory": "-1Gi"}, `memory: must be a size such as 20Gi or 512Mi (invalid quantity "-1Gi": must not be negative`},
		{map[string]string{"compute": "0.5", "memory": "lots"}, `memory: must be a size such as 20Gi or 512Mi`},
		{map[string]string{"compute": "0.5", "memory": "0"}, `memory: must be at least 1Mi, got "0"`},
		{map[string]string{"compute": "0.5", "memory": "200Gi"}, `memory: must be in [0, 143771Mi] (the memory of the largest allowed model, H200), got "200Gi"`},
		{map[string]string{"compute": "0.5", "memory": "30Gi", "model": "L4"}, `memory: must be in [0, 23034Mi] (the memory of the largest allowed model, L4), got "30Gi"`},
		{map[string]string{"compute": "0.5", "memory": "20Gi", "memory-limit": "10Gi"}, `memory-limit: must be in [20Gi, 143771Mi] (at least memory, at most the largest allowed model, H200), got "10Gi"`},
		{map[string]string{"compute": "0.5", "memory-limit": "1Ti"}, `memory-limit: must be in [0Mi, 143771Mi]`},
		{map[string]string{"compute": "0.5", "exclusive": "true"}, `exclusive: must be false when compute is below 1 (an exclusive request takes whole GPUs), got "true"`},
		{map[string]string{"exclusive": "yes"}, `exclusive: must be true or false, got "yes"`},
		{map[string]string{"model": "H2000"}, `model: must be a model from ` + "`tessera show-gpus -a`" + ` ("H2000"; did you mean H200`},
		{map[string]string{"model": "zzzz"}, `model: must be a model from`},
		{map[string]string{"model": " , |"}, `model: must be a list of GPU models such as H200 or A100-80GB|H100, got " , |"`},
		{map[string]string{"mig-profile": ""}, `mig-profile: must be a MIG profile name such as 1g.10gb, got ""`},
		{map[string]string{"mig-profile": "1g.10gb"}, `mig-profile: must be a MIG profile of an allowed model (H200 has 1g.18gb, 7g.141gb), got "1g.10gb"`},
		{map[string]string{"mig-profile": "3g.71gb", "model": "H200|L4|H100"}, `mig-profile: must be a MIG profile of an allowed model (H200 has 1g.18gb, 7g.141gb), got "3g.71gb"`},
		{map[string]string{"mig-profile": "1g.18gb", "model": "L4"}, `mig-profile: must be empty: none of the allowed models supports MIG, got "1g.18gb"`},
		{map[string]string{"mig-profile": "1g.18gb", "compute": "0.5"}, `mig-profile: must be empty when compute or compute-limit is set`},
		{map[string]string{"mig-profile": "1g.18gb", "compute": "1", "memory": "1Gi"}, `mig-profile: must be empty when memory or memory-limit is set`},
		{map[string]string{"mig-profile": "1g.18gb", "exclusive": "true"}, `mig-profile: must be empty when exclusive is true`},
	}
	for _, tc := range tests {
		_, err := Parse(tc.in, cat)
		if err == nil {
			t.Errorf("Parse(%v) succeeded, want error %q", tc.in, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) error\n got: %s\nwant: %s", tc.in, err, tc.want)
		}
	}
	if len(tests) < 30 {
		t.Fatalf("the issue asks for at least 30 bad inputs, have %d", len(tests))
	}
}

func TestValidateStruct(t *testing.T) {
	cat := catalogtest.Small()
	tests := []struct {
		r     GPU
		field string
	}{
		{GPU{}, FieldCount},
		{GPU{Count: 1}, FieldCompute},
		{GPU{Count: 1, ComputeMilli: 1001, ComputeLimitMilli: 1001}, FieldCompute},
		{GPU{Count: 1, ComputeMilli: 500}, FieldComputeLimit},
		{GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500, MemoryMiB: -5}, FieldMemory},
		{GPU{Count: 1, ComputeMilli: 500, ComputeLimitMilli: 500, Models: []string{"Z9"}}, FieldModel},
	}
	for _, tc := range tests {
		err := tc.r.Validate(cat)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("Validate(%+v) = %v, want a FieldError for %s", tc.r, err, tc.field)
		}
	}
	ok := GPU{Count: 8, ComputeMilli: 1000, ComputeLimitMilli: 1000}
	if err := ok.Validate(cat); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", ok, err)
	}
}

func TestResolveCompute(t *testing.T) {
	tests := []struct {
		r            GPU
		gpu          int64
		wantG, wantL int64
	}{
		{GPU{ComputeMilli: 250, ComputeLimitMilli: 800}, 80000, 250, 800},
		{GPU{MemoryMiB: 20000}, 80000, 250, 250},
		{GPU{MemoryMiB: 20000, ComputeLimitMilli: 1000}, 80000, 250, 1000},
		{GPU{MemoryMiB: 1}, 80000, 1, 1},         // rounds up, never 0
		{GPU{MemoryMiB: 20001}, 80000, 251, 251}, // rounds up
		{GPU{MemoryMiB: 90000}, 80000, 1000, 1000},
	}
	for _, tc := range tests {
		g, l := tc.r.ResolveCompute(tc.gpu)
		if g != tc.wantG || l != tc.wantL {
			t.Errorf("ResolveCompute(%+v, %d) = %d, %d; want %d, %d", tc.r, tc.gpu, g, l, tc.wantG, tc.wantL)
		}
	}
}

func TestResolveMemory(t *testing.T) {
	tests := []struct {
		r              GPU
		gpu            int64
		wantReq, wantL int64
	}{
		{GPU{ComputeMilli: 250}, 80000, 20000, 20000},
		{GPU{ComputeMilli: 250, MemoryMiB: 1024}, 80000, 1024, 1024},
		{GPU{ComputeMilli: 250, MemoryMiB: 1024, MemoryLimitMiB: 4096}, 80000, 1024, 4096},
		{GPU{ComputeMilli: 1000}, 81559, 81559, 81559},
		{GPU{ComputeMilli: 500, MemoryShareMilli: 250}, 80000, 20000, 20000},
		{GPU{ComputeMilli: 100, ComputeLimitMilli: 1000, MemoryLimitShareMilli: 1000}, 81559, 8155, 81559},
		{GPU{ComputeMilli: 200, MemoryShareMilli: 250, MemoryLimitShareMilli: 500}, 80000, 20000, 40000},
		{GPU{ComputeMilli: 333, MemoryLimitShareMilli: 333}, 1000, 333, 333},
		// A named limit caps the guarantee derived from the compute share
		// (0.25 of 143771 MiB would be 35942), never the other way round.
		{GPU{ComputeMilli: 250, ComputeLimitMilli: 450, MemoryLimitMiB: 20480}, 143771, 20480, 20480},
		{GPU{ComputeMilli: 250, MemoryLimitMiB: 40960}, 143771, 35942, 40960},
	}
	for _, tc := range tests {
		req, lim := tc.r.ResolveMemory(tc.gpu)
		if req != tc.wantReq || lim != tc.wantL {
			t.Errorf("ResolveMemory(%+v, %d) = %d, %d; want %d, %d", tc.r, tc.gpu, req, lim, tc.wantReq, tc.wantL)
		}
	}
}

// Without a catalog, Parse checks what does not depend on GPU models and
// leaves model names, memory bounds and MIG profiles to the caller.
func TestParseWithoutCatalog(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		want    GPU
		wantErr string
	}{
		{"memory beyond any model", map[string]string{"memory": "10Ti"}, GPU{Count: 1, MemoryMiB: 10 << 20}, ""},
		{"model names kept as given", map[string]string{"model": "Z9000|h100"}, GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, Models: []string{"Z9000", "h100"}}, ""},
		{"any MIG profile name", map[string]string{"mig-profile": "9g.1tb"}, GPU{Count: 1, ComputeMilli: 1000, ComputeLimitMilli: 1000, MIGProfile: "9g.1tb"}, ""},
		{"count still checked", map[string]string{"count": "x"}, GPU{}, `count: must be a whole number in [1, 16], got "x"`},
		{"memory limit below memory", map[string]string{"memory": "20Gi", "memory-limit": "10Gi"}, GPU{}, `memory-limit: must be at least 20Gi (memory, the guaranteed memory), got "10Gi"`},
		{"MIG with a share", map[string]string{"mig-profile": "1g.10gb", "compute": "0.5"}, GPU{}, "mig-profile: must be empty when compute or compute-limit is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// AllowedAs names the other fields an error mentions in a front door's
// words, and keeps the rest of the sentence.
func TestFieldErrorAllowedAs(t *testing.T) {
	flags := map[string]string{FieldCompute: "--gpu-fraction", FieldMemoryLimit: "--gpu-memory-limit"}
	name := func(f string) string { return flags[f] }
	tests := []struct {
		in   map[string]string
		want string
	}{
		{map[string]string{"compute": "0.5", "compute-limit": "0.25"}, "in [0.5, 1] (at least --gpu-fraction, the guaranteed compute)"},
		{map[string]string{"memory-limit": "20Gi"}, "set when --gpu-memory-limit is set without --gpu-fraction: a size such as 20Gi"},
		{map[string]string{"compute": "2"}, "a share in (0, 1], written 0.25, 25% or 250m, at most a thousandth fine"},
		{map[string]string{"model": "Z9000"}, "a model from `tessera show-gpus -a`"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in, catalogtest.Small())
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%v: err %v, want a *FieldError", tt.in, err)
			continue
		}
		if got := fe.AllowedAs(name); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%v: AllowedAs = %q, want it to start with %q", tt.in, got, tt.want)
		}
		if !strings.Contains(fe.Error(), fe.Allowed) {
			t.Errorf("%v: Error() %q lacks Allowed %q", tt.in, fe.Error(), fe.Allowed)
		}
	}
}
