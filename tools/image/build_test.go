package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestParseLDD(t *testing.T) {
	tests := []struct {
		name, out string
		want      []string
		err       string
	}{
		{
			name: "glibc program",
			out: "\tlinux-vdso.so.1 (0x00007ffd8d5f2000)\n" +
				"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0f2b800000)\n" +
				"\tlibpthread.so.0 => /lib/x86_64-linux-gnu/libpthread.so.0 (0x00007f0f2b7f0000)\n" +
				"\t/lib64/ld-linux-x86-64.so.2 (0x00007f0f2ba1c000)\n",
			want: []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libpthread.so.0", "/lib64/ld-linux-x86-64.so.2"},
		},
		{
			name: "a library twice",
			out:  "\tlibc.so.6 => /lib/libc.so.6 (0x1)\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n",
			want: []string{"/lib/libc.so.6"},
		},
		{name: "nothing", out: "", want: nil},
		{
			name: "missing library",
			out:  "\tlibnvidia-ml.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n",
			err:  "shared library libnvidia-ml.so.1: not found",
		},
		{name: "unreadable", out: "\tlibc.so.6 => ??? (0x1)\n", err: "cannot read line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLDD(tc.out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseLDD: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("parseLDD = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseFlagsRejects(t *testing.T) {
	ok := []string{"-ref", "example.com/a/b:1", "-out", "x.tar", "-add", "/bin/a=a", "-entrypoint", "/bin/a", "-epoch", "0"}
	with := func(args ...string) []string { return append(slices.Clone(ok), args...) }
	without := func(flag string) []string {
		var out []string
		for i := 0; i < len(ok); i += 2 {
			if ok[i] != flag {
				out = append(out, ok[i], ok[i+1])
			}
		}
		return out
	}
	tests := []struct {
		name string
		args []string
		env  string // SOURCE_DATE_EPOCH
		want string
	}{
		{"no ref", without("-ref"), "", "-ref: must be set"},
		{"no out", without("-out"), "", "-out: must be set"},
		{"no add", without("-add"), "", "-add: give at least one"},
		{"relative dest", with("-add", "bin/b=b"), "", `-add: must be /ABSOLUTE/PATH/IN/IMAGE=LOCAL/FILE with a clean image path, got "bin/b=b"`},
		{"unclean dest", with("-add", "/bin/../b=b"), "", `got "/bin/../b=b"`},
		{"no source", with("-add", "/bin/b="), "", `got "/bin/b="`},
		{"dest twice", with("-add", "/bin/a=c"), "", "-add: image path /bin/a given twice"},
		{"libs of unknown", with("-libs-of", "/bin/z"), "", `-libs-of: "/bin/z" is not the image path of an -add file (have /bin/a)`},
		{"no entrypoint", without("-entrypoint"), "", "-entrypoint: must be set"},
		{"user name", with("-user", "nobody"), "", `-user: must be UID or UID:GID in numbers, got "nobody"`},
		{"user three parts", with("-user", "1:2:3"), "", `got "1:2:3"`},
		{"env", with("-env", "NOEQUALS"), "", `-env: must be KEY=VALUE, got "NOEQUALS"`},
		{"label", with("-label", "=v"), "", `-label: must be KEY=VALUE, got "=v"`},
		{"created label", with("-label", createdLabel+"=x"), "", "-label: " + createdLabel + " is set from -epoch"},
		{"no epoch", without("-epoch"), "", "-epoch: must be set (or $SOURCE_DATE_EPOCH)"},
		{"bad epoch", with("-epoch", "yesterday"), "", `-epoch: must be Unix seconds in [0, 8589934592], got "yesterday"`},
		{"negative epoch", with("-epoch", "-1"), "", `got "-1"`},
		{"bad env epoch", without("-epoch"), "soon", `got "soon"`},
		{"argument", with("extra"), "", `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(tc.args, tc.env, io.Discard, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.want)
			}
		})
	}
	if s, err := parseFlags(without("-epoch"), "86400", io.Discard); err != nil || !s.epoch.Equal(time.Unix(86400, 0)) {
		t.Errorf("SOURCE_DATE_EPOCH=86400: epoch %v, %v", s.epoch, err)
	}
}

func TestBuildFailures(t *testing.T) {
	dir := t.TempDir()
	prog := writeFile(t, dir, "prog", "#!/bin/true\n", 0o755)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"-add", "/bin/x=" + filepath.Join(dir, "nope")}, "-add /bin/x=" + filepath.Join(dir, "nope") + ": stat"},
		{"a folder", []string{"-add", "/bin/x=" + dir}, "is not a regular file"},
		{"ref without tag", []string{"-add", "/bin/x=" + prog, "-ref", "example.com/a"}, `-ref: must be REGISTRY/REPOSITORY:TAG, got "example.com/a"`},
		{"file under a file", []string{"-add", "/bin/x=" + prog, "-add", "/bin/x/y=" + prog}, "/bin/x is a file and the folder of /bin/x/y"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-ref", "example.com/a:1", "-out", filepath.Join(t.TempDir(), "i.tar"), "-entrypoint", "/bin/x", "-epoch", "0"}, tc.args...)
			var stderr bytes.Buffer
			code := run(args, "", io.Discard, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return p
}

// layerEntry is what a test checks of a tar entry.
type layerEntry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	mtime    int64
	data     string
}

func readLayers(t *testing.T, tarPath string) (layers [][]layerEntry) {
	t.Helper()
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatalf("read %s: %v", tarPath, err)
	}
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var entries []layerEntry
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(tr)
			if h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: owner names %q:%q, want none", h.Name, h.Uname, h.Gname)
			}
			entries = append(entries, layerEntry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.Unix(), string(data)})
		}
		rc.Close()
		layers = append(layers, entries)
	}
	return layers
}

// TestBuildIsReproducible builds one spec twice from copies of the inputs
// made at different times and compares the tarballs byte for byte; it also
// checks the layer contents and the config.
func TestBuildIsReproducible(t *testing.T) {
	build := func(out string) string {
		t.Helper()
		dir := t.TempDir()
		prog := writeFile(t, dir, "prog", "#!/bin/true\nprogram\n", 0o750)
		data := writeFile(t, dir, "data", "some data\n", 0o600)
		// Input times must not matter.
		old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		if err := os.Chtimes(data, old, old); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"-ref", "example.com/team/app:v1", "-out", out, "-ref-file", out + ".ref",
			"-add", "/usr/local/bin/prog=" + prog, "-add", "/usr/share/app/data=" + data,
			"-entrypoint", "/usr/local/bin/prog", "-cmd", "serve", "-basics",
			"-label", "org.opencontainers.image.title=app", "-label", "org.opencontainers.image.version=v1"},
			"1700000000", &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		return stdout.String()
	}
	a, b := filepath.Join(t.TempDir(), "a.tar"), filepath.Join(t.TempDir(), "b.tar")
	outA, outB := build(a), build(b)
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if sha256.Sum256(da) != sha256.Sum256(db) {
		t.Errorf("two builds of the same inputs differ:\n%s%s", outA, outB)
	}
	if strings.TrimPrefix(outA, "wrote "+a) != strings.TrimPrefix(outB, "wrote "+b) {
		t.Errorf("the digests printed differ:\n%s%s", outA, outB)
	}
	if ref, err := os.ReadFile(a + ".ref"); err != nil || string(ref) != "example.com/team/app:v1\n" {
		t.Errorf("ref file: %q, %v", ref, err)
	}

	const epoch = 1700000000
	dir := func(name string) layerEntry { return layerEntry{name + "/", tar.TypeDir, 0o755, 0, 0, epoch, ""} }
	wantLayers := [][]layerEntry{
		{
			dir("etc"),
			{"etc/group", tar.TypeReg, 0o644, 0, 0, epoch, group},
			{"etc/passwd", tar.TypeReg, 0o644, 0, 0, epoch, passwd},
			dir("home"), dir("home/nonroot"),
			{"tmp/", tar.TypeDir, 0o1777, 0, 0, epoch, ""},
		},
		{
			dir("usr"), dir("usr/local"), dir("usr/local/bin"),
			{"usr/local/bin/prog", tar.TypeReg, 0o755, 0, 0, epoch, "#!/bin/true\nprogram\n"},
			dir("usr/share"), dir("usr/share/app"),
			{"usr/share/app/data", tar.TypeReg, 0o644, 0, 0, epoch, "some data\n"},
		},
	}
	if got := readLayers(t, a); !slices.EqualFunc(got, wantLayers, slices.Equal) {
		t.Errorf("layers:\n got %v\nwant %v", got, wantLayers)
	}

	img, err := tarball.ImageFromPath(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	wantLabels := map[string]string{"org.opencontainers.image.title": "app", "org.opencontainers.image.version": "v1", createdLabel: "2023-11-14T22:13:20Z"}
	switch {
	case cf.OS != "linux" || cf.Architecture == "":
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	case !cf.Created.Equal(time.Unix(epoch, 0)):
		t.Errorf("created %v, want the epoch", cf.Created)
	case c.User != "65532:65532" || c.WorkingDir != "/":
		t.Errorf("user %q, working dir %q", c.User, c.WorkingDir)
	case !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/prog"}) || !slices.Equal(c.Cmd, []string{"serve"}):
		t.Errorf("entrypoint %q, cmd %q", c.Entrypoint, c.Cmd)
	case !slices.Equal(c.Env, []string{"PATH=/usr/local/bin:/usr/bin:/bin"}):
		t.Errorf("env %q", c.Env)
	case len(c.Labels) != len(wantLabels):
		t.Errorf("labels %v, want %v", c.Labels, wantLabels)
	}
	for k, v := range wantLabels {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	for _, h := range cf.History {
		if !h.Created.Equal(time.Unix(epoch, 0)) {
			t.Errorf("history entry %q created %v, want the epoch", h.CreatedBy, h.Created)
		}
	}
}

// TestLibsOf packs a dynamically linked program with its libraries and
// runs it from the unpacked files through the packed loader alone.
func TestLibsOf(t *testing.T) {
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true program")
	}
	prog, _ = filepath.EvalSymlinks(prog)
	libs, err := sharedLibs(prog)
	if err != nil || len(libs) == 0 {
		t.Skipf("%s has no shared libraries ldd reports (%v)", prog, err)
	}
	out := filepath.Join(t.TempDir(), "i.tar")
	var stderr bytes.Buffer
	if code := run([]string{"-ref", "example.com/t:1", "-out", out, "-add", "/bin/true=" + prog, "-libs-of", "/bin/true", "-entrypoint", "/bin/true", "-epoch", "0"}, "", io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	layers := readLayers(t, out)
	if len(layers) != 2 {
		t.Fatalf("%d layers, want the libraries' and the program's", len(layers))
	}
	root := t.TempDir()
	var loader string
	for _, l := range libs {
		found := false
		for _, e := range layers[0] {
			if e.name == strings.TrimPrefix(l, "/") {
				found = true
				if e.typ != tar.TypeReg || e.mode != 0o755 && e.mode != 0o644 {
					t.Errorf("%s: type %c mode %o, want a plain file", l, e.typ, e.mode)
				}
				p := filepath.Join(root, e.name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(e.data), 0o755); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(filepath.Base(l), "ld-linux") {
					loader = p
				}
			}
		}
		if !found {
			t.Errorf("library %s is not in the image", l)
		}
	}
	if loader == "" {
		t.Skip("no ld-linux loader among the libraries")
	}
	var dirs []string
	for _, l := range libs {
		dirs = append(dirs, filepath.Join(root, filepath.Dir(l)))
	}
	cmd := exec.Command(loader, "--inhibit-cache", "--library-path", strings.Join(dirs, ":"), prog)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("running %s with the packed libraries: %v\n%s", prog, err, out)
	}
}
