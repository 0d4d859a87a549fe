package scripts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// repoRoot is the folder of the Makefile (tests run in scripts/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// need skips the test when a tool a new user's machine has (make, bash, a C
// compiler for cgo) is missing here.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: %v", tool, err)
		}
	}
}

// makeCmd runs make in the repository root as a user would: without the
// settings of a make this test may run under (make test), so that it reads
// the Makefile afresh.
func makeCmd(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-C", repoRoot(t), "--no-print-directory"}, args...)...)
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// goCC is the C compiler cgo uses.
func goCC(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatalf("go env CC: %v", err)
	}
	cc := strings.Fields(string(out))
	if len(cc) == 0 {
		t.Skip("go env CC is empty")
	}
	need(t, cc[0])
	return cc
}

// compileC compiles src with flags; it returns the compiler's stderr and
// whether it succeeded.
func compileC(t *testing.T, cc, flags []string, src string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(append(slices.Clone(cc[1:]), flags...), "-c", file, "-o", filepath.Join(dir, "probe.o"))
	var stderr bytes.Buffer
	cmd := exec.Command(cc[0], args...)
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stderr.String(), err == nil
}

// TestMakeBuildSilencesOnlyDependencyDeprecations checks the flags `make
// build` (and so `make run`) hands to go build, without a full cold build:
// a cold compile of go-nvml takes about a minute, and a warm one prints
// nothing whatever the flags, so it would prove nothing. Instead a stand-in
// `go` records the environment and arguments the Makefile runs it with, and
// the C compiler cgo uses compiles small probes against go-nvml's own nvml.h
// with exactly those CGO_CFLAGS:
//   - a reference to a function nvml.h marks DEPRECATED (what go-nvml's cgo
//     code does some thirty times) warns with Go's default flags, and is
//     silent with the Makefile's;
//   - a #warning still prints, and a real error still fails: the flags turn
//     off that one warning class, not warnings or errors in general.
func TestMakeBuildSilencesOnlyDependencyDeprecations(t *testing.T) {
	need(t, "make", "go")
	cc := goCC(t)
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "go-build.txt")
	fakeGo := filepath.Join(dir, "go")
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = build ]; then printf 'CGO_CFLAGS=%%s\\n' \"$CGO_CFLAGS\" >%q; printf '%%s\\n' \"$@\" >>%q; exit 0; fi\nexec %q \"$@\"\n", record, record, realGo)
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := makeCmd(t, nil, "-s", "build", "GO="+fakeGo, "BIN="+filepath.Join(dir, "tessera"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("make build did not run go build: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	cflags := strings.Fields(strings.TrimPrefix(lines[0], "CGO_CFLAGS="))
	if !slices.Contains(cflags, "-Wno-deprecated-declarations") {
		t.Fatalf("make build runs go build with CGO_CFLAGS=%q: want -Wno-deprecated-declarations", cflags)
	}
	for _, f := range cflags {
		if f == "-w" || strings.HasPrefix(f, "-Wno-error") {
			t.Errorf("CGO_CFLAGS has %s: it would hide more than the deprecation warnings", f)
		}
	}
	args := lines[1:]
	if i := slices.Index(args, "-ldflags"); i < 0 || i+1 >= len(args) {
		t.Errorf("go build %q: no -ldflags", args)
	} else {
		for _, v := range []string{"version", "commit", "buildDate"} {
			if !strings.Contains(args[i+1], "-X github.com/tessera-gpu/tessera/cmd/tessera/cli."+v+"=") {
				t.Errorf("-ldflags %q does not set cmd/tessera/cli.%s", args[i+1], v)
			}
		}
	}

	modDir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
	if err != nil {
		t.Fatalf("go list go-nvml: %v", err)
	}
	nvmlDir := filepath.Join(strings.TrimSpace(string(modDir)), "pkg", "nvml")
	header, err := os.ReadFile(filepath.Join(nvmlDir, "nvml.h"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`DEPRECATED\([^)]*\)\s+nvmlReturn_t\s+DECLDIR\s+(\w+)\s*\(`).FindSubmatch(header)
	if m == nil {
		t.Fatal("nvml.h declares no DEPRECATED function any more: this test (and perhaps the flag) can go")
	}
	// go-nvml's own cgo preamble: #cgo CFLAGS: -DNVML_NO_UNVERSIONED_FUNC_DEFS=1, #include "nvml.h".
	include := []string{"-DNVML_NO_UNVERSIONED_FUNC_DEFS=1", "-I", nvmlDir}
	deprecated := fmt.Sprintf("#include \"nvml.h\"\nvoid *probe(void) { return (void *)&%s; }\n", m[1])
	goDefault := append([]string{"-O2", "-g"}, include...)
	makefile := append(slices.Clone(cflags), include...)

	if stderr, ok := compileC(t, cc, goDefault, deprecated); !ok || !strings.Contains(stderr, "-Wdeprecated-declarations") {
		t.Fatalf("the probe does not reproduce go-nvml's warning with Go's default flags (ok=%v):\n%s", ok, stderr)
	}
	if stderr, ok := compileC(t, cc, makefile, deprecated); !ok || stderr != "" {
		t.Errorf("with the Makefile's CGO_CFLAGS %q the deprecated NVML call still prints (ok=%v):\n%s", cflags, ok, stderr)
	}
	if stderr, ok := compileC(t, cc, makefile, "#warning tessera-probe-warning\nint x;\n"); !ok || !strings.Contains(stderr, "tessera-probe-warning") {
		t.Errorf("with the Makefile's CGO_CFLAGS a #warning is hidden (ok=%v): %q", ok, stderr)
	}
	if stderr, ok := compileC(t, cc, makefile, "int f(void) { return undeclared_thing; }\n"); ok || !strings.Contains(stderr, "undeclared_thing") {
		t.Errorf("with the Makefile's CGO_CFLAGS a real error passes (ok=%v): %q", ok, stderr)
	}
}

// TestMakeRun runs the README's first command for real (the build is warm
// in the test cache: the cold-build warnings are the test above's business)
// and checks, from the daemon's own job records, that the demo showed what
// Tessera is for.
func TestMakeRun(t *testing.T) {
	need(t, "make", "bash", "go")
	dir := t.TempDir()
	bin := filepath.Join(dir, "tessera")
	records := filepath.Join(dir, "jobs.json")
	var out bytes.Buffer
	cmd := makeCmd(t, []string{"TESSERA_DEMO_RECORDS=" + records}, "-s", "run", "BIN="+bin)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("make run: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Run("output", func(t *testing.T) {
		if !strings.Contains(text, "go build -o "+bin+" ./cmd/tessera") {
			t.Errorf("no build line in:\n%s", text)
		}
		if m := regexp.MustCompile(`(?im)^.*\b(warning|deprecated)\b.*$`).FindString(text); m != "" {
			t.Errorf("make run printed %q", m)
		}
		for _, want := range []string{"$ tessera ps --gpus", "$ tessera queue", "Try next:"} {
			if !strings.Contains(text, want) {
				t.Errorf("output lacks %q:\n%s", want, text)
			}
		}
	})
	t.Run("jobs shared one GPU", func(t *testing.T) {
		data, err := os.ReadFile(records)
		if err != nil {
			t.Fatalf("the demo wrote no job records: %v\n%s", err, text)
		}
		var jobs []api.Job
		if err := json.Unmarshal(data, &jobs); err != nil {
			t.Fatal(err)
		}
		checkSharing(t, jobs)
	})
	t.Run("version", func(t *testing.T) {
		head, err := exec.Command("git", "-C", repoRoot(t), "rev-parse", "HEAD").Output()
		if err != nil {
			t.Skipf("not a git checkout: %v", err)
		}
		got, err := exec.Command(bin, "version", "-o", "json").Output()
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Version, Commit, Date, DateKind string }
		if err := json.Unmarshal(got, &v); err != nil {
			t.Fatal(err)
		}
		if v.Version == "" || v.Version == "devel" || !strings.HasPrefix(v.Commit, strings.TrimSpace(string(head))) || v.DateKind != "built" {
			t.Errorf("tessera version of make's build = %+v: want the Makefile's version, commit %s and build date", v, head)
		}
		if _, err := time.Parse(time.RFC3339, v.Date); err != nil {
			t.Errorf("build date: %v", err)
		}
	})
	t.Run("fails when a job cannot run", func(t *testing.T) {
		// An L4 has 24 GB: the first job's 40Gi is refused at submission.
		cmd := exec.Command("bash", "demo.sh", bin)
		cmd.Env = append(os.Environ(), "TESSERA_DEMO_SIMULATE=1xL4", "TESSERA_DEMO_HTTP=off", "TMPDIR="+dir)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Error: ") || strings.Contains(string(out), "Try next") {
			t.Errorf("demo on an L4: err %v, want a non-zero exit with tessera run's error and no closing lines:\n%s", err, out)
		}
		// Its state folder (under TMPDIR) is gone: the daemon was shut down.
		if left, _ := filepath.Glob(filepath.Join(dir, "tessera-demo.*")); len(left) != 0 {
			t.Errorf("the demo left %v behind", left)
		}
	})
}

// checkSharing asserts what the demo is for, from job records: every job
// succeeded, at least two ran on the same GPU at the same time, and a job
// that was submitted while the GPU was full started only once a job on it
// had finished.
func checkSharing(t *testing.T, jobs []api.Job) {
	t.Helper()
	type span struct {
		id                     string
		submitted, start, stop time.Time
	}
	byGPU := map[string][]span{}
	for _, j := range jobs {
		if j.State != api.Succeeded || j.Started == nil || j.Finished == nil {
			t.Fatalf("%s: state %s, started %v, finished %v: want succeeded with both times", j.ID, j.State, j.Started, j.Finished)
		}
		for _, s := range j.Shares {
			byGPU[s.UUID] = append(byGPU[s.UUID], span{j.ID, j.Submitted, *j.Started, *j.Finished})
		}
	}
	most, waited := 0, false
	for gpu, spans := range byGPU {
		for _, a := range spans {
			// Jobs running on this GPU the moment a started.
			n := 0
			for _, b := range spans {
				if !b.start.After(a.start) && b.stop.After(a.start) {
					n++
				}
				if a.id != b.id && a.submitted.Before(b.stop) && !a.start.Before(b.stop) {
					waited = true
				}
			}
			if n > most {
				most = n
				t.Logf("%s: %d jobs running at once when %s started", gpu, n, a.id)
			}
		}
	}
	if most < 2 {
		t.Errorf("no two jobs ran on one GPU at the same time: %+v", byGPU)
	}
	if !waited {
		t.Errorf("no job waited for another to leave its GPU: %+v", byGPU)
	}
}
