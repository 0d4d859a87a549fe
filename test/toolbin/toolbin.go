package toolbin

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
)

// ClusterModule pins every program the tests run beside Tessera's own code
// but containerd and Kueue. They are built together: one module means one version of
// each shared library, and one `go build` of all of them compiles each
// shared package once.
const ClusterModule = "tools/cluster"

// ContainerdModule pins containerd for the real node: a module of its own,
// since containerd's requirements would raise libraries kubelet is built
// with (and so rebuild every program of ClusterModule).
const ContainerdModule = "tools/containerd"

// KueueModule pins Kueue, the job queueing controller the tests put in
// front of Tessera: a module of its own, since Kueue's Kubernetes libraries
// are older than the ones kube-apiserver is built with.
const KueueModule = "tools/kueue"

// Version stamps (-X ldflags), as the projects' release builds set them:
// without them kubelet and kube-apiserver report v0.0.0-master and
// containerd 2.x.y+unknown.
const (
	versionFlag           = "k8s.io/component-base/version.gitVersion"
	containerdVersionFlag = "github.com/containerd/containerd/v2/version.Version"
	kueueVersionFlag      = "sigs.k8s.io/kueue/pkg/version.GitVersion"
)

// tool describes one program of a tools module.
type tool struct {
	module string // tools module, relative to the repository root
	pkg    string // package to build, in the tools module
	pinned string // module whose required version names the binary
}

// Tools known to the harness, by binary name (the last element of pkg).
func knownTools() map[string]tool {
	const kube = "k8s.io/kubernetes"
	const ctrd = "github.com/containerd/containerd/v2"
	return map[string]tool{
		"etcd":                    {module: ClusterModule, pkg: "./etcd", pinned: "go.etcd.io/etcd/server/v3"},
		"kube-apiserver":          {module: ClusterModule, pkg: kube + "/cmd/kube-apiserver", pinned: kube},
		"kube-scheduler":          {module: ClusterModule, pkg: kube + "/cmd/kube-scheduler", pinned: kube},
		"kube-controller-manager": {module: ClusterModule, pkg: kube + "/cmd/kube-controller-manager", pinned: kube},
		"kubelet":                 {module: ClusterModule, pkg: kube + "/cmd/kubelet", pinned: kube},
		"kwok":                    {module: ClusterModule, pkg: "sigs.k8s.io/kwok/cmd/kwok", pinned: "sigs.k8s.io/kwok"},
		"helm":                    {module: ClusterModule, pkg: "./helm", pinned: "helm.sh/helm/v4"},
		"containerd":              {module: ContainerdModule, pkg: ctrd + "/cmd/containerd", pinned: ctrd},
		"containerd-shim-runc-v2": {module: ContainerdModule, pkg: ctrd + "/cmd/containerd-shim-runc-v2", pinned: ctrd},
		"ctr":                     {module: ContainerdModule, pkg: ctrd + "/cmd/ctr", pinned: ctrd},
		"kueue":                   {module: KueueModule, pkg: "sigs.k8s.io/kueue/cmd/kueue", pinned: "sigs.k8s.io/kueue"},
	}
}

// buildFlags are the `go build` flags of a tools module's programs, given
// the versions of its pinned modules. -s -w leave out the symbol table and
// DWARF: the tests run these programs and never debug them, and linking
// DWARF for seven Kubernetes binaries is minutes of a cold CI run (stack
// traces need neither).
func buildFlags(module string, versions map[string]string) []string {
	const strip = "-s -w "
	if module == KueueModule {
		return []string{"-ldflags", strip + "-X " + kueueVersionFlag + "=" + versions["kueue"]}
	}
	if module == ContainerdModule {
		// no_btrfs: the btrfs snapshotter needs cgo (CGO_ENABLED=0 would
		// leave it out anyway; the tag says so). urfave_cli_no_docs drops
		// ctr's man-page generator, as containerd's release builds do.
		return []string{"-tags", "no_btrfs urfave_cli_no_docs", "-ldflags", strip + "-X " + containerdVersionFlag + "=" + versions["containerd"]}
	}
	return []string{"-ldflags", strip + "-X " + versionFlag + "=" + versions["kubelet"]}
}

// Pinned is the module whose required version names the tool's binary
// (for Kueue, the module that also holds its CRDs), or "" for a name
// Binary does not know.
func Pinned(name string) string { return knownTools()[name].pinned }

// Binary returns the path of a cached binary of one of the tools modules'
// programs ("etcd", "kube-apiserver", "kube-scheduler",
// "kube-controller-manager", "kubelet", "kwok", "helm" from tools/cluster;
// "containerd", "containerd-shim-runc-v2", "ctr" from tools/containerd;
// "kueue" from tools/kueue).
// When the cache has no build of the module's pinned versions, it first
// builds every program of that module the cache lacks, in one `go build`
// (static: CGO_ENABLED=0). Concurrent callers, also in other processes,
// build once.
func Binary(ctx context.Context, name string) (string, error) {
	want, ok := knownTools()[name]
	if !ok {
		return "", fmt.Errorf("unknown tools binary %q", name)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	modDir := filepath.Join(root, want.module)
	gomod, key, err := cacheKey(modDir)
	if err != nil {
		return "", err
	}
	cacheDir, err := CacheDir()
	if err != nil {
		return "", err
	}
	paths := map[string]string{}
	versions := map[string]string{}
	for n, t := range knownTools() {
		if t.module != want.module {
			continue
		}
		v := RequiredVersion(gomod, t.pinned)
		if v == "" {
			return "", fmt.Errorf("tools module %s does not require %s", modDir, t.pinned)
		}
		versions[n] = v
		paths[n] = filepath.Join(cacheDir, fmt.Sprintf("%s-%s-%s-%s_%s", n, v, key, runtime.GOOS, runtime.GOARCH))
	}
	if _, err := os.Stat(paths[name]); err == nil {
		return paths[name], nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create binary cache: %w", err)
	}
	unlock, err := LockFile(filepath.Join(cacheDir, "tools-"+key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	var missing []string
	for n := range paths {
		if _, err := os.Stat(paths[n]); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 { // built by another process meanwhile
		return paths[name], nil
	}
	sort.Strings(missing)
	if err := buildTools(ctx, want.module, modDir, cacheDir, buildFlags(want.module, versions), missing, paths); err != nil {
		return "", err
	}
	return paths[name], nil
}

// buildTools builds the named programs of the tools module in modDir with
// one `go build` and moves each into the cache at paths[name].
func buildTools(ctx context.Context, module, modDir, cacheDir string, flags, names []string, paths map[string]string) error {
	tmp, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return fmt.Errorf("create build folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := append([]string{"build", "-trimpath"}, flags...)
	args = append(args, "-o", tmp+string(filepath.Separator))
	for _, n := range names {
		args = append(args, knownTools()[n].pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s in %s: %w\n%s", strings.Join(names, ", "), module, err, msg)
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(tmp, n), paths[n]); err != nil {
			return fmt.Errorf("install %s into the cache: %w", n, err)
		}
	}
	return nil
}

// CacheDir is where built binaries are kept: $TESSERA_TOOLS_CACHE, else
// <user cache dir>/tessera/control-plane.
func CacheDir() (string, error) {
	if d := os.Getenv("TESSERA_TOOLS_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache directory (set TESSERA_TOOLS_CACHE): %w", err)
	}
	return filepath.Join(d, "tessera", "control-plane"), nil
}

// cacheKey returns the tools module's go.mod and a hash of go.mod, go.sum
// and the Go version, so a change to any pinned dependency rebuilds.
func cacheKey(modDir string) (gomod, key string, err error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return "", "", fmt.Errorf("read tools module: %w", err)
		}
		h.Write(data)
		if f == "go.mod" {
			gomod = string(data)
		}
	}
	h.Write([]byte(runtime.Version()))
	return gomod, hex.EncodeToString(h.Sum(nil))[:12], nil
}

// RequiredVersion is the version go.mod (its text) requires of module, or "".
func RequiredVersion(gomod, module string) string {
	sc := bufio.NewScanner(strings.NewReader(gomod))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	return ""
}

// repoRoot walks up from the working directory to the main module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/tessera-gpu/tessera\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no go.mod of github.com/tessera-gpu/tessera above the working directory")
		}
		dir = parent
	}
}

// lockFile takes an exclusive advisory lock on path.
func LockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
