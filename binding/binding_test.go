package binding

import (
	"reflect"
	"strings"
	"testing"
)

func valid() Assignment {
	return Assignment{Version: 1, Node: "n1", Containers: []Container{{Name: "main", GPUs: []Share{
		{UUID: "GPU-a", Index: 0, ComputeMilli: 250, ComputeLimitMilli: 800, MemoryMiB: 20480, MemoryLimitMiB: 30720},
	}}}}
}

func TestRoundTrip(t *testing.T) {
	s, err := Encode(valid())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, valid()) {
		t.Fatalf("round trip: %+v", got)
	}
	if c, ok := got.Container("main"); !ok || c.GPUs[0].UUID != "GPU-a" {
		t.Fatalf("Container(main) = %+v, %v", c, ok)
	}
	if _, ok := got.Container("sidecar"); ok {
		t.Fatal("Container(sidecar) found")
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, "decode assignment: EOF"},
		{`{`, "decode assignment"},
		{`[]`, "decode assignment"},
		{`{"v":1,"node":"n","containers":[],"extra":1}`, `unknown field "extra"`},
		{`{"v":1} {}`, "trailing data"},
		{`{"v":2,"node":"n"}`, "assignment.v: must be 1, got 2"},
		{`{"v":1}`, "assignment.node: must not be empty"},
		{`{"v":1,"node":"n","containers":[]}`, "assignment.containers: must list at least one container"},
		{`{"v":1,"node":"n","containers":[{"name":"","gpus":[]}]}`, "assignment.containers[0].name: must not be empty"},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[]}]}`, "assignment.containers[0].gpus: must list at least one GPU"},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[{"uuid":""}]}]}`, "gpus[0].uuid: must not be empty"},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[{"uuid":"u","index":-1}]}]}`, "gpus[0].index: must be >= 0, got -1"},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[{"uuid":"u","compute":0}]}]}`, "gpus[0].compute: must be in [1, 1000], got 0"},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[{"uuid":"u","compute":500,"computeLimit":400}]}]}`, "gpus[0].computeLimit: must be in [500, 1000], got 400"},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[{"uuid":"u","compute":500,"computeLimit":500,"memoryMiB":0}]}]}`, "gpus[0].memoryMiB: must be >= 1, got 0"},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[{"uuid":"u","compute":500,"computeLimit":500,"memoryMiB":10,"memoryLimitMiB":5}]}]}`, "gpus[0].memoryLimitMiB: must be >= memoryMiB (10), got 5"},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[{"uuid":"u","compute":1000,"computeLimit":1000,"memoryMiB":1,"memoryLimitMiB":1},{"uuid":"u","compute":1000,"computeLimit":1000,"memoryMiB":1,"memoryLimitMiB":1}]}]}`, `gpus[1].uuid: "u" is listed twice`},
		{`{"v":1,"node":"n","containers":[{"name":"a","gpus":[{"uuid":"u","compute":1000,"computeLimit":1000,"memoryMiB":1,"memoryLimitMiB":1}]},{"name":"a","gpus":[{"uuid":"v","compute":1000,"computeLimit":1000,"memoryMiB":1,"memoryLimitMiB":1}]}]}`, `containers[1].name: "a" is listed twice`},
	}
	for _, tc := range tests {
		_, err := Decode(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%s)\n got: %v\nwant: %s", tc.in, err, tc.want)
		}
	}
	bad := valid()
	bad.Node = ""
	if _, err := Encode(bad); err == nil {
		t.Error("Encode accepted an invalid assignment")
	}
}

// FuzzDecode checks that Decode never panics and that whatever it accepts
// encodes back to an equal assignment.
func FuzzDecode(f *testing.F) {
	s, _ := Encode(valid())
	f.Add(s)
	f.Add(`{"v":1}`)
	f.Fuzz(func(t *testing.T, in string) {
		a, err := Decode(in)
		if err != nil {
			return
		}
		out, err := Encode(a)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", in, err)
		}
		b, err := Decode(out)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("re-decode of %q: %+v, %v", out, b, err)
		}
	})
}

func TestMIGShares(t *testing.T) {
	share := func(uuid string, m *MIGInstance) Assignment {
		a := valid()
		a.Containers[0].GPUs[0] = Share{UUID: uuid, Index: 2, ComputeMilli: 428, ComputeLimitMilli: 428,
			MemoryMiB: 40192, MemoryLimitMiB: 40192, MIGProfile: "3g.40gb", MIG: m}
		return a
	}
	ok := []Assignment{
		share("MIG-1", &MIGInstance{GPU: "GPU-a", Start: 4}),
		share("MIG-1", &MIGInstance{GPU: "GPU-a", Start: -1}),
		share("GPU-a", &MIGInstance{GPU: "GPU-a", Start: 0, Create: true}),
	}
	for _, a := range ok {
		s, err := Encode(a)
		if err != nil {
			t.Fatalf("%+v: %v", a.Containers[0].GPUs[0].MIG, err)
		}
		got, err := Decode(s)
		if err != nil || !reflect.DeepEqual(got, a) {
			t.Errorf("round trip of %s: %+v, %v", s, got, err)
		}
	}
	bad := []struct {
		a    Assignment
		want string
	}{
		{func() Assignment {
			a := share("MIG-1", &MIGInstance{GPU: "GPU-a"})
			a.Containers[0].GPUs[0].MIGProfile = ""
			return a
		}(), "migProfile: must be set when mig is set"},
		{share("MIG-1", &MIGInstance{Start: 4}), "mig.gpu: must not be empty"},
		{share("MIG-1", &MIGInstance{GPU: "GPU-a", Start: -2}), "mig.start: must be >= 0, or -1 when unknown, got -2"},
		{share("GPU-a", &MIGInstance{GPU: "GPU-a", Start: -1, Create: true}), "mig.start: must be >= 0 when create is true"},
		{share("MIG-1", &MIGInstance{GPU: "GPU-a", Start: 0, Create: true}), `uuid: must be the parent GPU's UUID "GPU-a" while the instance is to be created, got "MIG-1"`},
		{share("GPU-a", &MIGInstance{GPU: "GPU-a", Start: 4}), `uuid: must be the MIG instance's UUID, not the parent GPU's "GPU-a"`},
	}
	for _, tc := range bad {
		if _, err := Encode(tc.a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Encode: %v, want %q", err, tc.want)
		}
	}
}
