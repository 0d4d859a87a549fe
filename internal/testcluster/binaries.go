package testcluster

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
	"strings"
	"syscall"
)

// tool describes one control-plane binary and where it is built from.
type tool struct {
	name   string // binary name
	dir    string // tools module folder, relative to the repository root
	pkg    string // package to build
	pinned string // module whose required version keys the cache
	// versionFlag, when set, is the -X ldflag that stamps the pinned
	// version into the binary (as the project's release builds do);
	// without it kubelet reports v0.0.0-master to the API server.
	versionFlag string
}

// Tools known to the harness.
func knownTools() map[string]tool {
	return map[string]tool{
		"etcd":                    {name: "etcd", dir: "tools/etcd", pkg: ".", pinned: "go.etcd.io/etcd/server/v3"},
		"kube-apiserver":          {name: "kube-apiserver", dir: "tools/kube", pkg: "k8s.io/kubernetes/cmd/kube-apiserver", pinned: "k8s.io/kubernetes"},
		"kube-scheduler":          {name: "kube-scheduler", dir: "tools/kube", pkg: "k8s.io/kubernetes/cmd/kube-scheduler", pinned: "k8s.io/kubernetes"},
		"kube-controller-manager": {name: "kube-controller-manager", dir: "tools/controllers", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", pinned: "k8s.io/kubernetes"},
		"kwok":                    {name: "kwok", dir: "tools/kwok", pkg: "sigs.k8s.io/kwok/cmd/kwok", pinned: "sigs.k8s.io/kwok"},
		"kubelet": {name: "kubelet", dir: "tools/kubelet", pkg: "k8s.io/kubernetes/cmd/kubelet", pinned: "k8s.io/kubernetes",
			versionFlag: "k8s.io/component-base/version.gitVersion"},
		"helm": {name: "helm", dir: "tools/helm", pkg: ".", pinned: "helm.sh/helm/v4"},
	}
}

// Binary returns the path of a cached control-plane binary ("etcd",
// "kube-apiserver", "kube-scheduler", "kwok", "kubelet"), building it first when the
// cache has no build of the pinned version. Concurrent callers, also in
// other processes, build it once.
func Binary(ctx context.Context, name string) (string, error) {
	t, ok := knownTools()[name]
	if !ok {
		return "", fmt.Errorf("unknown control-plane binary %q", name)
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	modDir := filepath.Join(root, t.dir)
	version, key, err := cacheKey(modDir, t.pinned)
	if err != nil {
		return "", err
	}
	cacheDir, err := CacheDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, fmt.Sprintf("%s-%s-%s-%s_%s", t.name, version, key, runtime.GOOS, runtime.GOARCH))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create binary cache: %w", err)
	}
	unlock, err := lockFile(out + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil { // built by another process meanwhile
		return out, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", out, os.Getpid())
	defer os.Remove(tmp)
	args := []string{"build", "-trimpath", "-o", tmp}
	if t.versionFlag != "" {
		args = append(args, "-ldflags", "-X "+t.versionFlag+"="+version)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, t.pkg)...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s %s in %s: %w\n%s", t.name, version, t.dir, err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("install %s into the cache: %w", t.name, err)
	}
	return out, nil
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

// cacheKey reads the pinned module's version from go.mod and hashes go.mod
// and go.sum, so a change to any pinned dependency rebuilds.
func cacheKey(modDir, pinned string) (version, key string, err error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return "", "", fmt.Errorf("read tools module: %w", err)
		}
		h.Write(data)
		if f == "go.mod" {
			version = requiredVersion(string(data), pinned)
		}
	}
	if version == "" {
		return "", "", fmt.Errorf("tools module %s does not require %s", modDir, pinned)
	}
	h.Write([]byte(runtime.Version()))
	return version, hex.EncodeToString(h.Sum(nil))[:12], nil
}

func requiredVersion(gomod, module string) string {
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
func repoRoot() (string, error) {
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
func lockFile(path string) (func(), error) {
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
