package cli

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolveBuildInfo(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260501120000-0123456789ab+dirty"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef"},
		{Key: "vcs.time", Value: "2026-05-01T12:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	noVCS := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	tests := []struct {
		name                      string
		ldVersion, ldCommit, date string
		bi                        *debug.BuildInfo
		want                      buildInfo
	}{
		{"make build: the linked-in values win", "v1.2.3", "fedcba-dirty", "2026-06-01T08:00:00Z", vcs,
			buildInfo{Version: "v1.2.3", Commit: "fedcba-dirty", Date: "2026-06-01T08:00:00Z", DateKind: "built"}},
		{"plain go build in a checkout: Go's vcs stamps", "", "", "", vcs,
			buildInfo{Version: "v0.0.0-20260501120000-0123456789ab+dirty", Commit: "0123456789abcdef", Date: "2026-05-01T12:00:00Z", DateKind: "committed", Modified: true}},
		{"plain go build without vcs (-buildvcs=false)", "", "", "", noVCS,
			buildInfo{Version: "devel", Commit: "unknown", Date: "unknown", DateKind: "built"}},
		{"no build information at all", "", "", "", nil,
			buildInfo{Version: "devel", Commit: "unknown", Date: "unknown", DateKind: "built"}},
		{"only the version linked in: the rest from vcs", "v1.2.3", "", "", vcs,
			buildInfo{Version: "v1.2.3", Commit: "0123456789abcdef", Date: "2026-05-01T12:00:00Z", DateKind: "committed", Modified: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := resolveBuildInfo(tc.ldVersion, tc.ldCommit, tc.date, tc.bi)
			if got.GoVersion == "" || !strings.Contains(got.Platform, "/") {
				t.Errorf("go version %q, platform %q: want both", got.GoVersion, got.Platform)
			}
			got.GoVersion, got.Platform = "", ""
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	out, errOut, code := run(t, "version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// A test binary has no linked-in values: the fallbacks are printed.
	for _, want := range []string{"tessera ", "\ncommit:  ", "\ngo:      go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	out, errOut, code = run(t, "version", "-o", "json")
	if code != 0 {
		t.Fatalf("-o json: exit %d: %s", code, errOut)
	}
	var info buildInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Version == "" || info.Commit == "" || info.Date == "" {
		t.Fatalf("-o json: %v %+v from %q", err, info, out)
	}
	if _, errOut, code := run(t, "version", "-o", "xml"); code == 0 || !strings.Contains(errOut, "-o/--output") {
		t.Errorf("-o xml: exit %d, %q", code, errOut)
	}
}
