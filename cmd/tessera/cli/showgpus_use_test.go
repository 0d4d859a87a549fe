package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/catalog/catalogtest"
	"github.com/tessera-gpu/tessera/gpusummary"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/inventory"
)

// tessera show-gpus against a host daemon prints each model's and each
// GPU's use beside the booking, labelled measured or simulated (summed
// apart) or not metered and why; -o json carries the same figures.
func TestShowGPUsUseColumn(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	notMetered := &gpuuse.Use{Source: gpuuse.None, Reason: "not metered: no job runs on it"}
	gpu := func(i int, uuid string) inventory.GPU {
		return inventory.GPU{Index: i, UUID: uuid, Model: "H200", Health: inventory.Healthy}
	}
	tests := []struct {
		name  string
		use   []*gpuuse.Use // per GPU-0, GPU-1; nil: the daemon reports none
		row   string        // the model row's USED
		gpus  []string      // each GPU line's USED
		json  []string
		never string
	}{
		{"measured", []*gpuuse.Use{
			{Source: gpuuse.Measured, BusyMilli: i64(400), MemoryUsedMiB: i64(8192)},
			{Source: gpuuse.Measured, BusyMilli: i64(350), MemoryUsedMiB: i64(2048)}},
			"0.75 measured (10 GiB)", []string{"0.4 measured (8 GiB)", "0.35 measured (2 GiB)"},
			[]string{`"measured": {`, `"gpus": 2`, `"busy": 0.75`, `"memoryUsedMiB": 10240`, `"busyMilli": 400`}, "simulated"},
		{"simulated", []*gpuuse.Use{
			{Source: gpuuse.Simulated, BusyMilli: i64(300)},
			notMetered},
			"0.3 simulated + 1 not metered", []string{"0.3 simulated", "not metered: no job runs on it"},
			[]string{`"simulated": {`, `"busy": 0.3`, `"notMetered": 1`, `"source": "simulated"`}, "measured"},
		{"not metered", []*gpuuse.Use{notMetered, nil},
			"2 not metered", []string{"not metered: no job runs on it", "not metered: the host daemon does not report use"},
			[]string{`"notMetered": 2`, `"reason": "not metered: no job runs on it"`}, "measured"},
		{"mixed", []*gpuuse.Use{
			{Source: gpuuse.Measured, BusyMilli: i64(500)},
			{Source: gpuuse.Simulated, BusyMilli: i64(200)}},
			"0.5 measured + 0.2 simulated", []string{"0.5 measured", "0.2 simulated"},
			[]string{`"measured": {`, `"simulated": {`}, "0.7"},
	}
	for _, tc := range tests {
		nodes := []inventory.Node{{Name: "h", GPUs: []inventory.GPU{gpu(0, "GPU-0"), gpu(1, "GPU-1")}}}
		st := api.Status{GPUs: []api.GPUStatus{
			{Index: 0, UUID: "GPU-0", Model: "H200", FreeFraction: 0.5, Use: tc.use[0]},
			{Index: 1, UUID: "GPU-1", Model: "H200", FreeFraction: 1, Use: tc.use[1]},
		}}
		if n := overlayBookings(st, nodes); n != 2 {
			t.Fatalf("%s: %d GPUs matched", tc.name, n)
		}
		rep, err := gpusummary.Build(catalogtest.Small(), "sim:2xH200", nodes, gpusummary.Options{Use: daemonUse(st)})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := writeGPUTable(&b, rep); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(b.String(), "\n")
		if !strings.HasSuffix(strings.TrimSpace(lines[0]), "FREE CAPACITY  USED") {
			t.Errorf("%s: header %q has no USED column", tc.name, lines[0])
		}
		if !strings.HasPrefix(lines[1], "H200") || !strings.Contains(lines[1], "1.5  ") || !strings.HasSuffix(lines[1], tc.row) {
			t.Errorf("%s: model row %q, want free capacity 1.5 and USED %q", tc.name, lines[1], tc.row)
		}
		for i, want := range tc.gpus {
			l := lines[2+i]
			if !strings.HasPrefix(l, "  GPU "+string(rune('0'+i))) || !strings.Contains(l, want) {
				t.Errorf("%s: GPU %d line %q, want %q", tc.name, i, l, want)
			}
		}
		if strings.Contains(b.String(), tc.never) {
			t.Errorf("%s: table shows %q:\n%s", tc.name, tc.never, b.String())
		}
		var j bytes.Buffer
		if err := writeStructured(&j, "json", rep); err != nil {
			t.Fatal(err)
		}
		for _, w := range append(tc.json, `"withUse": true`, `"devices": [`) {
			if !strings.Contains(j.String(), w) {
				t.Errorf("%s: -o json lacks %s:\n%s", tc.name, w, j.String())
			}
		}
		var back gpusummary.Report
		if err := json.Unmarshal(j.Bytes(), &back); err != nil || back.Rows[0].Use == nil || len(back.Rows[0].GPUs) != 2 {
			t.Errorf("%s: -o json does not read back with use: %v", tc.name, err)
		}
	}
}

// A running daemon's idle GPUs show as not metered, and why; without a
// daemon the table has no USED column and the JSON no use.
func TestShowGPUsDaemonUse(t *testing.T) {
	host := startUp(t, "2xH200").host
	code, out, errs := tessera(append([]string{"show-gpus", "h200"}, host...)...)
	if code != 0 {
		t.Fatalf("show-gpus: exit %d: %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 4 || !strings.HasSuffix(lines[0], "USED") || !strings.HasPrefix(lines[1], "H200 ") ||
		!strings.HasSuffix(lines[1], "not metered: no job runs on it") ||
		!strings.HasPrefix(lines[2], "  GPU 0") || !strings.HasSuffix(lines[2], "not metered: no job runs on it") ||
		!strings.HasPrefix(lines[3], "  GPU 1") || !strings.HasSuffix(lines[3], "not metered: no job runs on it") {
		t.Errorf("show-gpus against an idle daemon:\n%s", out)
	}
	var rep gpusummary.Report
	structured(t, &rep, append([]string{"show-gpus", "h200", "-o", "json"}, host...)...)
	if !rep.WithUse || len(rep.Rows) == 0 || rep.Rows[0].Model != "H200" || rep.Rows[0].Use == nil || rep.Rows[0].Use.NotMetered != 2 || len(rep.Rows[0].GPUs) != 2 {
		t.Errorf("show-gpus -o json against an idle daemon: %+v", rep)
	}
	out, _, code = run(t, "show-gpus", "--source", "sim:2xH200", "--state-dir", t.TempDir())
	if code != 0 || strings.Contains(out, "USED") || strings.Contains(out, "metered") {
		t.Errorf("show-gpus without a daemon (exit %d) shows use:\n%s", code, out)
	}
}
