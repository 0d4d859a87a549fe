package testcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-gpu/tessera/test/toolbin"
)

// The real node: a kubelet built from tools/cluster and containerd built
// from tools/containerd, with runc from the machine's packages, on a
// throwaway root folder. The configuration is the one that ran here (see
// ../shared/real-node), moved to containerd 2's configuration: the
// constraints it answers are noted where they apply.

// realNodeLock serializes real nodes across test processes: a kubelet's
// device-plugin socket (/var/lib/kubelet/device-plugins/kubelet.sock),
// /var/log/containers and port 10250 are fixed whatever its root folder,
// so one runs per machine at a time.
const realNodeLock = "/tmp/tessera-real-node.lock"

// Paths of what the machine's packages install (Debian bookworm: runc
// containernetworking-plugins). containerd, its shim and ctr are built from
// tools/containerd.
const (
	runcBin   = "/usr/sbin/runc"
	cniBinDir = "/usr/lib/cni"
)

// cdiSpecDirs are the machine's CDI spec folders containerd reads (the
// standard ones, where a DRA driver or device plugin writes); each node
// adds its own RealNode.CDIDir.
func cdiSpecDirs() []string { return []string{"/etc/cdi", "/var/run/cdi"} }

// kubeletSysctls are the sysctls kubelet changes at start, restored by Stop.
func kubeletSysctls() []string {
	return []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}
}

// RealNodeUnavailable says why this machine cannot run a real node ("" when
// it can): the harness needs root, runc and the CNI plugins (apt-get
// install runc containernetworking-plugins) and an IPv4 address on a
// non-loopback interface (kubelet refuses loopback). containerd is not
// asked of the machine: StartRealNode builds it.
func RealNodeUnavailable() string {
	if os.Geteuid() != 0 {
		return "a real node needs root (kubelet and containerd manage cgroups and mounts)"
	}
	var missing []string
	for _, p := range []string{runcBin, filepath.Join(cniBinDir, "loopback")} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("a real node needs runc and the CNI plugins (apt-get install runc containernetworking-plugins); missing: %s", strings.Join(missing, ", "))
	}
	if _, err := nodeIP(); err != nil {
		return err.Error()
	}
	return ""
}

// NodeOptions tunes StartRealNode.
type NodeOptions struct {
	// Name is the node's name (default "real-0").
	Name string
	// Images are image archives (docker or OCI tarballs) imported into
	// containerd's k8s.io namespace before kubelet starts: no registry is
	// reached.
	Images []string
	// PauseImage is the sandbox image reference; pods start only when it is
	// among Images (default "registry.k8s.io/pause:3.10").
	PauseImage string
}

// RealNode is a kubelet with containerd registered with a Cluster.
type RealNode struct {
	// Name and IP are the node's name and InternalIP (an address of this
	// machine's own interface: the API server reaches kubelet there).
	Name, IP string
	// Root is the throwaway folder of containerd's and kubelet's state.
	Root string
	// CDIDir is a CDI spec folder of this node only (under Root), read by
	// containerd beside /etc/cdi and /var/run/cdi: a test writes its specs
	// here to leave the machine's folders alone.
	CDIDir string

	sock                string // containerd's socket
	ctr                 string // ctr built with containerd
	containerd, kubelet *process
	sysctls             map[string]string
	created             []string // fixed paths kubelet makes that did not exist before
	unlock              func()
}

// fixedPaths are the folders kubelet makes outside its root folder.
func fixedPaths() []string {
	return []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods"}
}

// deviceManagerSocket is kubelet's device-plugin registration socket, at
// this path whatever its root folder.
const deviceManagerSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// StartRealNode starts containerd and kubelet on this machine and waits
// until the node is Ready. Call Stop when done; it restores the machine.
func (c *Cluster) StartRealNode(ctx context.Context, opt NodeOptions) (n *RealNode, err error) {
	if why := RealNodeUnavailable(); why != "" {
		return nil, errors.New(why)
	}
	if opt.Name == "" {
		opt.Name = "real-0"
	}
	if opt.PauseImage == "" {
		opt.PauseImage = "registry.k8s.io/pause:3.10"
	}
	bins := map[string]string{}
	for _, name := range []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if bins[name], err = toolbin.Binary(ctx, name); err != nil {
			return nil, err
		}
	}
	unlock, err := toolbin.LockFile(realNodeLock)
	if err != nil {
		return nil, err
	}
	ip, err := nodeIP()
	if err != nil {
		unlock()
		return nil, err
	}
	// Short: containerd's socket path must fit a sockaddr_un.
	root, err := os.MkdirTemp("", "tn-")
	if err != nil {
		unlock()
		return nil, fmt.Errorf("real node root: %w", err)
	}
	n = &RealNode{Name: opt.Name, IP: ip, Root: root, CDIDir: filepath.Join(root, "cdi"), sock: filepath.Join(root, "containerd", "containerd.sock"),
		ctr: bins["ctr"], sysctls: map[string]string{}, unlock: unlock}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	for _, p := range fixedPaths() {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			n.created = append(n.created, p)
		}
	}
	for _, k := range kubeletSysctls() {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", k, err)
		}
		n.sysctls[k] = strings.TrimSpace(string(v))
	}
	files := map[string]string{
		"containerd.toml":                containerdConfig(root, opt.PauseImage, bins["containerd-shim-runc-v2"]),
		"cni/net.d/10-loopback.conflist": loopbackConflist,
		"kubelet-config.yaml":            kubeletConfig(root, ip),
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("real node: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, fmt.Errorf("real node: %w", err)
		}
	}
	if err := os.MkdirAll(n.CDIDir, 0o755); err != nil {
		return nil, fmt.Errorf("real node: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.readyTimeout)
	defer cancel()
	if n.containerd, err = startProcess("containerd", bins["containerd"], root, "--config", filepath.Join(root, "containerd.toml")); err != nil {
		return nil, err
	}
	if err := n.containerd.waitFor(wctx, func(ctx context.Context) error {
		_, err := n.Ctr(ctx, "version")
		return err
	}); err != nil {
		return nil, err
	}
	for _, img := range opt.Images {
		if out, err := n.Ctr(ctx, "images", "import", img); err != nil {
			return nil, fmt.Errorf("import image %s into containerd: %w\n%s", img, err, out)
		}
	}
	n.kubelet, err = startProcess("kubelet", bins["kubelet"], root,
		"--config", filepath.Join(root, "kubelet-config.yaml"), "--kubeconfig", c.Kubeconfig,
		"--root-dir", filepath.Join(root, "kubelet"), "--cert-dir", filepath.Join(root, "pki"),
		"--hostname-override", opt.Name, "--node-ip", ip, "--v=1")
	if err != nil {
		return nil, err
	}
	if err := n.kubelet.waitFor(wctx, c.nodeReady(opt.Name)); err != nil {
		return nil, err
	}
	return n, nil
}

// nodeReady checks that the node exists with condition Ready=True.
func (c *Cluster) nodeReady(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Host+"/api/v1/nodes/"+name, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("node %s: HTTP %d", name, resp.StatusCode)
		}
		var node struct {
			Status struct {
				Conditions []struct{ Type, Status, Message string } `json:"conditions"`
			} `json:"status"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&node); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == "Ready" {
				if cond.Status == "True" {
					return nil
				}
				return fmt.Errorf("node %s not ready: %s", name, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", name)
	}
}

// Ctr runs containerd's ctr (built with it) on the node's containerd, in
// the k8s.io namespace (the one kubelet uses).
func (n *RealNode) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, n.ctr, append([]string{"--address", n.sock, "--namespace", "k8s.io"}, args...)...)
	return cmd.CombinedOutput()
}

// KubeletLog returns the last lines of kubelet's log.
func (n *RealNode) KubeletLog(lines int) string { return n.kubelet.logTail(lines) }

// RestartKubelet stops kubelet (SIGTERM) and starts it again with the
// same arguments; containers keep running.
func (n *RealNode) RestartKubelet(ctx context.Context, c *Cluster) error {
	n.kubelet.stop(10 * time.Second)
	p, err := startProcess("kubelet", n.kubelet.cmd.Path, n.Root, n.kubelet.cmd.Args[1:]...)
	if err != nil {
		return err
	}
	n.kubelet = p
	wctx, cancel := context.WithTimeout(ctx, c.readyTimeout)
	defer cancel()
	return p.waitFor(wctx, c.nodeReady(n.Name))
}

// Stop ends kubelet, the pods' containers and containerd, unmounts what
// they left under Root, removes their cgroups, restores the sysctls
// kubelet changed and removes Root. It is safe to call twice.
func (n *RealNode) Stop() {
	if n == nil || n.unlock == nil {
		return
	}
	n.kubelet.stop(10 * time.Second)
	if n.containerd != nil {
		if gone, _ := n.containerd.exited(); !gone {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			n.removeContainers(ctx)
			cancel()
		}
	}
	n.containerd.stop(10 * time.Second)
	unmountUnder(n.Root)
	removeCgroups()
	for k, v := range n.sysctls {
		_ = os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644)
	}
	_ = os.RemoveAll(n.Root)
	_ = os.Remove(deviceManagerSocket)
	for _, p := range n.created {
		_ = os.RemoveAll(p)
	}
	n.unlock()
	n.unlock = nil
}

// removeContainers kills every task of the k8s.io namespace (their shims
// outlive containerd) and removes the containers.
func (n *RealNode) removeContainers(ctx context.Context) {
	out, err := n.Ctr(ctx, "tasks", "ls", "-q")
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.Ctr(ctx, "tasks", "kill", "-a", "-s", "SIGKILL", id)
		}
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.Ctr(ctx, "tasks", "delete", "-f", id)
		}
	}
	if out, err := n.Ctr(ctx, "containers", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.Ctr(ctx, "containers", "delete", id)
		}
	}
}

// unmountUnder lazily unmounts every mount point under root, deepest first.
func unmountUnder(root string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == root || strings.HasPrefix(fields[4], root+"/")) {
			points = append(points, fields[4])
		}
	}
	f.Close()
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// removeCgroups removes the (empty, once the containers are gone) cgroup
// trees kubelet and containerd made: kubepods and k8s.io in every
// hierarchy, deepest first.
func removeCgroups() {
	var dirs []string
	for _, top := range []string{"kubepods", "kubepods.slice", "k8s.io"} {
		matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", top))
		more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", top))
		for _, m := range append(matches, more...) {
			_ = filepath.WalkDir(m, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		_ = syscall.Rmdir(d)
	}
}

// nodeIP returns an IPv4 address of this machine's first non-loopback
// interface that is up: kubelet refuses a loopback node IP, and traffic to
// the machine's own address stays on the machine.
func nodeIP() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("a real node needs an IPv4 address on a non-loopback interface (kubelet refuses loopback)")
}

// containerdConfig is containerd 2's configuration (version 3, the one
// its CRI documentation gives; containerd migrates it to its latest
// version in memory at start) for the node: restrict_oom_score_adj (this
// sandbox refuses a negative oom_score_adj; without it every sandbox
// fails with "can't get final child's PID from pipe: EOF"), cgroupfs
// (SystemdCgroup = false), no AppArmor, runc from the machine's packages
// (crun fails on hybrid cgroups) run by the shim built with containerd
// (runtime_path: containerd would otherwise take the first
// containerd-shim-runc-v2 on PATH, maybe an older package's), the
// loopback-only CNI folder, and CDI (always on in containerd 2) reading
// /etc/cdi, /var/run/cdi and the node's own folder. What containerd would
// put in fixed folders of the machine stays under root: the opt plugin's
// folder and network namespaces; NRI, unused, is off (its socket is
// fixed).
func containerdConfig(root, pause, shim string) string {
	ctrd := filepath.Join(root, "containerd")
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = %[5]q
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = %[6]q

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[7]q

[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [%[8]s]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = %[9]q
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %[10]q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[11]q]
    conf_dir = %[12]q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
`, filepath.Join(ctrd, "root"), filepath.Join(ctrd, "state"),
		filepath.Join(ctrd, "containerd.sock"), filepath.Join(ctrd, "containerd.sock.ttrpc"),
		filepath.Join(ctrd, "debug.sock"), filepath.Join(ctrd, "opt"), pause,
		tomlStrings(append(cdiSpecDirs(), filepath.Join(root, "cdi"))), shim, runcBin, cniBinDir, filepath.Join(root, "cni", "net.d"))
}

// tomlStrings writes ss as the items of a TOML array of strings (Go's
// quoting is TOML's for these plain paths).
func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// loopbackConflist is enough for the node to be Ready and for hostNetwork
// pods.
const loopbackConflist = `{
  "cniVersion": "1.0.0",
  "name": "tessera-lo",
  "plugins": [ { "type": "loopback" } ]
}
`

// kubeletConfig: cgroupfs, cgroup v1 and swap allowed, anonymous access
// with AlwaysAllow (a throwaway test node only), eviction and image GC
// kept from acting on a busy shared disk.
func kubeletConfig(root, ip string) string {
	sock := "unix://" + filepath.Join(root, "containerd", "containerd.sock")
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: %[1]s
imageServiceEndpoint: %[1]s
address: %[2]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
resolvConf: /etc/resolv.conf
registerNode: true
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
podLogsDir: %[3]s
`, sock, ip, filepath.Join(root, "kubelet", "pod-logs"))
}
