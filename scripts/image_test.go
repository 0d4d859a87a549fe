package scripts

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// imageFile is one file of an image tarball's layers.
type imageFile struct {
	typ  byte
	mode int64
	uid  int
	gid  int
	data []byte
}

// imageConfig is the part of an image config the test reads.
type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Created      string `json:"created"`
	Config       struct {
		User       string
		Entrypoint []string
		Labels     map[string]string
	} `json:"config"`
}

// dockerArchive is a docker-archive tarball as docker load reads it.
type dockerArchive struct {
	repoTags []string
	config   imageConfig
	files    map[string]imageFile // by path without the leading slash
}

// readDockerArchive reads the manifest.json, the config and the layers
// (gzip tars) of a docker-archive tarball.
func readDockerArchive(t *testing.T, file string) dockerArchive {
	t.Helper()
	blobs := map[string][]byte{}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if blobs[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(blobs["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s: manifest.json: %v (%d images)", file, err, len(manifest))
	}
	m := manifest[0]
	a := dockerArchive{repoTags: m.RepoTags, files: map[string]imageFile{}}
	if err := json.Unmarshal(blobs[m.Config], &a.config); err != nil {
		t.Fatalf("%s: config %s: %v", file, m.Config, err)
	}
	for _, l := range m.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(blobs[l]))
		if err != nil {
			t.Fatalf("%s: layer %s: %v", file, l, err)
		}
		lr := tar.NewReader(zr)
		for {
			h, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer %s: %v", file, l, err)
			}
			data, err := io.ReadAll(lr)
			if err != nil {
				t.Fatal(err)
			}
			a.files[strings.TrimSuffix(h.Name, "/")] = imageFile{h.Typeflag, h.Mode, h.Uid, h.Gid, data}
		}
	}
	return a
}

// unpack writes the image's folders and files under root.
func (a dockerArchive) unpack(t *testing.T, root string) {
	t.Helper()
	for name, f := range a.files {
		p := filepath.Join(root, name)
		switch f.typ {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.data, os.FileMode(f.mode).Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("/%s: unexpected entry type %c", name, f.typ)
		}
	}
}

func sha256File(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// TestMakeImage builds the image and the pause image twice, as `make
// image` does, and checks they are identical, hold what the chart needs and
// that the tessera inside runs as the image's user with only the image's
// files.
func TestMakeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image twice (-short)")
	}
	need(t, "make", "go", "ldd")
	goCC(t)
	head, err := exec.Command("git", "-C", repoRoot(t), "log", "-1", "--format=%H %ct").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	commit, epoch, _ := strings.Cut(strings.TrimSpace(string(head)), " ")
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		t.Fatalf("commit time %q: %v", epoch, err)
	}
	created := time.Unix(sec, 0).UTC().Format(time.RFC3339)

	var dirs []string
	for i := range 2 {
		dir := t.TempDir()
		dirs = append(dirs, dir)
		var out bytes.Buffer
		cmd := makeCmd(t, nil, "-s", "image", "IMAGE_DIR="+dir, "BIN="+filepath.Join(dir, "tessera"))
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("make image (build %d): %v\n%s", i+1, err, out.String())
		}
		if i == 0 {
			t.Logf("make image:\n%s", out.String())
		}
	}
	for _, name := range []string{"tessera-image.tar", "pause-image.tar"} {
		if a, b := sha256File(t, filepath.Join(dirs[0], name)), sha256File(t, filepath.Join(dirs[1], name)); a != b {
			t.Errorf("%s: two builds of the same tree differ: sha256 %s and %s", name, a, b)
		}
	}
	dir := dirs[0]
	refData, err := os.ReadFile(filepath.Join(dir, "tessera-image.ref"))
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimSuffix(string(refData), "\n")
	version, ok := strings.CutPrefix(ref, "ghcr.io/tessera-gpu/tessera:")
	if !ok || version == "" || strings.Contains(ref, "\n") {
		t.Fatalf("tessera-image.ref holds %q, want one line ghcr.io/tessera-gpu/tessera:VERSION", refData)
	}
	img := readDockerArchive(t, filepath.Join(dir, "tessera-image.tar"))

	t.Run("config", func(t *testing.T) {
		c := img.config
		if len(img.repoTags) != 1 || img.repoTags[0] != ref {
			t.Errorf("tags %q, want [%s]", img.repoTags, ref)
		}
		if c.OS != "linux" || c.Architecture == "" || c.Created != created {
			t.Errorf("platform %s/%s created %s; want linux, an architecture and the commit time %s", c.OS, c.Architecture, c.Created, created)
		}
		if c.Config.User != "65532:65532" {
			t.Errorf("user %q, want 65532:65532 (non-root)", c.Config.User)
		}
		if len(c.Config.Entrypoint) != 1 || c.Config.Entrypoint[0] != "/usr/local/bin/tessera" {
			t.Errorf("entrypoint %q", c.Config.Entrypoint)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.title":    "tessera",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.source":   "https://github.com/tessera-gpu/tessera",
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.created":  created,
		} {
			if got := c.Config.Labels[k]; got != want {
				t.Errorf("label %s = %q, want %q", k, got, want)
			}
		}
		if rev := c.Config.Labels["org.opencontainers.image.revision"]; !strings.HasPrefix(rev, commit) {
			t.Errorf("label org.opencontainers.image.revision = %q, want commit %s", rev, commit)
		}
	})

	t.Run("files", func(t *testing.T) {
		lib, err := os.ReadFile(filepath.Join(repoRoot(t), "intercept", "build", "libtessera-intercept.so"))
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string][]byte{"usr/local/bin/tessera": nil, "usr/local/lib/tessera/libtessera-intercept.so": lib} {
			f, ok := img.files[name]
			switch {
			case !ok:
				t.Errorf("/%s is not in the image", name)
			case f.typ != tar.TypeReg || f.mode != 0o755 || f.uid != 0 || f.gid != 0:
				t.Errorf("/%s: type %c mode %o owner %d:%d, want a file, 0755, 0:0", name, f.typ, f.mode, f.uid, f.gid)
			case want != nil && !bytes.Equal(f.data, want):
				t.Errorf("/%s differs from the library make intercept built", name)
			}
		}
		for _, name := range []string{"bin/sh", "usr/bin/sh"} {
			if _, ok := img.files[name]; ok {
				t.Errorf("the image has /%s; it should hold no shell", name)
			}
		}
	})

	t.Run("tessera runs", func(t *testing.T) {
		root := t.TempDir()
		img.unpack(t, root)
		args := []string{"version", "-o", "json"}
		var cmd *exec.Cmd
		if os.Geteuid() == 0 {
			// Only the image's files, as its user.
			cmd = exec.Command("/usr/local/bin/tessera", args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
			cmd.Dir = "/"
			if err := os.Chmod(root, 0o755); err != nil {
				t.Fatal(err)
			}
		} else {
			// The image's loader and libraries, found by their paths.
			loader, dirs := "", map[string]bool{}
			for name, f := range img.files {
				if f.typ == tar.TypeReg && strings.Contains(name, ".so") && !strings.Contains(name, "tessera") {
					dirs[filepath.Join(root, path.Dir(name))] = true
					if strings.HasPrefix(path.Base(name), "ld-linux") {
						loader = filepath.Join(root, name)
					}
				}
			}
			if loader == "" {
				t.Skip("not root and no ld-linux loader in the image to run tessera with")
			}
			var libPath []string
			for d := range dirs {
				libPath = append(libPath, d)
			}
			cmd = exec.Command(loader, append([]string{"--inhibit-cache", "--library-path", strings.Join(libPath, ":"), filepath.Join(root, "usr/local/bin/tessera")}, args...)...)
		}
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("tessera version in the image: %v\n%s", err, ee.Stderr)
			}
			t.Fatalf("tessera version in the image: %v", err)
		}
		var v struct{ Version, Commit, Date, DateKind string }
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("tessera version printed %q: %v", out, err)
		}
		if v.Version != version || !strings.HasPrefix(v.Commit, commit) || v.Date != created || v.DateKind != "built" {
			t.Errorf("tessera version in the image: %+v; want version %s, commit %s, built %s (the commit time: reproducible)", v, version, commit, created)
		}
	})

	t.Run("pause image", func(t *testing.T) {
		p := readDockerArchive(t, filepath.Join(dir, "pause-image.tar"))
		if len(p.repoTags) != 1 || p.repoTags[0] != "registry.k8s.io/pause:3.10" {
			t.Errorf("pause tags %q, want registry.k8s.io/pause:3.10", p.repoTags)
		}
		f, ok := p.files["pause"]
		if !ok || f.mode != 0o755 || len(p.config.Config.Entrypoint) != 1 || p.config.Config.Entrypoint[0] != "/pause" {
			t.Fatalf("pause image: /pause %+v present %v, entrypoint %q", f.mode, ok, p.config.Config.Entrypoint)
		}
		bin := filepath.Join(t.TempDir(), "pause")
		if err := os.WriteFile(bin, f.data, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("ldd", bin).CombinedOutput(); err == nil || !strings.Contains(string(out), "not a dynamic executable") {
			t.Errorf("pause is not static: ldd says %q", out)
		}
	})

	t.Run("containerd import", func(t *testing.T) {
		lib, err := os.ReadFile(filepath.Join(repoRoot(t), "intercept", "build", "libtessera-intercept.so"))
		if err != nil {
			t.Fatal(err)
		}
		importIntoContainerd(t, ref, version, lib, filepath.Join(dir, "tessera-image.tar"), filepath.Join(dir, "pause-image.tar"))
	})
}

// importIntoContainerd imports the tarballs with ctr into a containerd of
// its own (root only, with containerd, ctr and runc installed), runs
// tessera version in the image, and tessera install-lib the way the
// agent's init container does, into a host folder: the library it
// installs must be lib.
func importIntoContainerd(t *testing.T, ref, version string, lib []byte, tarballs ...string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	for _, tool := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir, err := os.MkdirTemp("", "tctr") // short: the socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "c.sock")
	config := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = %q\n",
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock)
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	daemon := exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	daemon.Stdout, daemon.Stderr = &logs, &logs
	if err := daemon.Start(); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	t.Cleanup(func() {
		daemon.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ctr := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
		return string(out), err
	}
	for { // until containerd answers
		if _, err := ctr("version"); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("containerd exited: %v\n%s", err, logs.String())
		case <-ctx.Done():
			t.Fatalf("containerd did not answer: %v\n%s", ctx.Err(), logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, tb := range tarballs {
		if out, err := ctr("images", "import", tb); err != nil {
			t.Fatalf("ctr images import %s: %v\n%s", tb, err, out)
		}
	}
	out, err := ctr("images", "ls", "-q")
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, out)
	}
	have := map[string]bool{}
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		have[strings.TrimSpace(sc.Text())] = true
	}
	for _, want := range []string{ref, "registry.k8s.io/pause:3.10"} {
		if !have[want] {
			t.Errorf("containerd lists %q, not %s", out, want)
		}
	}
	out, err = ctr("run", "--rm", ref, "tessera-image-test", "/usr/local/bin/tessera", "version")
	if err != nil {
		t.Fatalf("ctr run %s tessera version: %v\n%s", ref, err, out)
	}
	if !strings.HasPrefix(out, "tessera "+version+"\n") {
		t.Errorf("tessera version in containerd printed %q, want tessera %s first", out, version)
	}
	host := filepath.Join(dir, "host-lib")
	if err := os.Mkdir(host, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(host, 0o777); err != nil { // the image's user writes it
		t.Fatal(err)
	}
	out, err = ctr("run", "--rm", "--mount", "type=bind,src="+host+",dst=/var/lib/tessera/lib,options=rbind:rw", ref, "tessera-install-lib-test",
		"/usr/local/bin/tessera", "install-lib", "--from", "/usr/local/lib/tessera/libtessera-intercept.so", "--to", "/var/lib/tessera/lib")
	if err != nil || !strings.HasPrefix(out, "installed libtessera-intercept.so ") {
		t.Fatalf("tessera install-lib in the image: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(filepath.Join(host, "libtessera-intercept.so")); err != nil || !bytes.Equal(got, lib) {
		t.Errorf("after install-lib in the image, the host's library symlink reads %d bytes (%v), want the image's library", len(got), err)
	}
}
