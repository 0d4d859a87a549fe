package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/agent"
	"github.com/tessera-gpu/tessera/agent/handoff"
	"github.com/tessera-gpu/tessera/agent/kubeletsim"
	"github.com/tessera-gpu/tessera/binding"
)

// TestInterceptLibrarySymlinkIsResolvedAtHandOut installs two versions of
// the library the way tessera install-lib does (a versioned folder each, a
// stable symlink to the current one): each container is given the file the
// symlink named when it was allocated, so swapping the symlink changes the
// library of later containers only.
func TestInterceptLibrarySymlinkIsResolvedAtHandOut(t *testing.T) {
	h := newHarness(t, "1xH100-SXM")
	libDir := filepath.Join(h.dir, "libs")
	link := filepath.Join(libDir, "libtessera-intercept.so")
	versioned := map[string]string{}
	for _, v := range []string{"v1-aaaaaaaaaaaa", "v2-bbbbbbbbbbbb"} {
		file := filepath.Join(libDir, v, "libtessera-intercept.so")
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte("\x7fELF "+v), 0o755); err != nil {
			t.Fatal(err)
		}
		real, err := filepath.EvalSymlinks(file) // the temp folder may be under a symlink
		if err != nil {
			t.Fatal(err)
		}
		versioned[v] = real
	}
	point := func(v string) {
		t.Helper()
		tmp := link + ".new"
		if err := os.Symlink(filepath.Join(v, "libtessera-intercept.so"), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, link); err != nil {
			t.Fatal(err)
		}
	}
	point("v1-aaaaaaaaaaaa")
	cfg := h.config()
	cfg.Paths.HostInterceptLibrary = link
	h.startAgent(cfg)
	ctx := context.Background()
	admit := func(name string) string {
		t.Helper()
		pod := h.bind("team", name, oneGPU, map[string][]binding.Share{"main": {h.share(0, 100, 500, 1024)}})
		got, err := h.kubelet.Admit(ctx, pod, kubeletsim.AdmitOptions{})
		if err != nil {
			t.Fatalf("admit %s: %v", name, err)
		}
		a := got["main"]
		if a.Envs["LD_PRELOAD"] != handoff.ContainerInterceptLibrary || !a.ReadOnly[handoff.ContainerInterceptLibrary] {
			t.Errorf("pod %s: LD_PRELOAD %q, read-only mount %v; want %s mounted read-only", name, a.Envs["LD_PRELOAD"], a.ReadOnly[handoff.ContainerInterceptLibrary], handoff.ContainerInterceptLibrary)
		}
		return a.Mounts[handoff.ContainerInterceptLibrary]
	}
	if got := admit("before"); got != versioned["v1-aaaaaaaaaaaa"] {
		t.Errorf("before the upgrade: library mounted from %q, want the versioned file %q", got, versioned["v1-aaaaaaaaaaaa"])
	}
	point("v2-bbbbbbbbbbbb")
	if got := admit("after"); got != versioned["v2-bbbbbbbbbbbb"] {
		t.Errorf("after the upgrade: library mounted from %q, want the versioned file %q", got, versioned["v2-bbbbbbbbbbbb"])
	}
	if got := h.kubelet.Allocations("team", "before")["main"].Mounts[handoff.ContainerInterceptLibrary]; got != versioned["v1-aaaaaaaaaaaa"] {
		t.Errorf("the running container's library moved to %q with the upgrade, want %q", got, versioned["v1-aaaaaaaaaaaa"])
	}
}

// TestAgentRefusesAMissingInterceptLibrary: an agent told to hand out a
// library that is not there refuses to start, naming the path.
func TestAgentRefusesAMissingInterceptLibrary(t *testing.T) {
	h := newHarness(t, "1xH100-SXM")
	dangling := filepath.Join(h.dir, "dangling.so")
	if err := os.Symlink(filepath.Join(h.dir, "gone", "libtessera-intercept.so"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, lib, want string
	}{
		{"missing file", filepath.Join(h.dir, "nowhere", "libtessera-intercept.so"), "does not exist on this node"},
		{"dangling symlink", dangling, "does not exist on this node"},
		{"a folder", h.dir, "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := h.config()
			cfg.Paths.HostInterceptLibrary = tc.lib
			_, err := agent.New(cfg)
			if err == nil {
				t.Fatalf("agent started with intercept library %s", tc.lib)
			}
			for _, want := range []string{"intercept library", tc.lib, tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}
