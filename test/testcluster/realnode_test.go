package testcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/toolbin"
)

// TestRealNodeRegistersReady starts a real kubelet (built from
// tools/cluster) with containerd (built from tools/containerd) and runc on
// this machine against the real control plane, checks that it registers
// Ready with its version, runtime and InternalIP, and that Stop leaves the
// machine as it was.
func TestRealNodeRegistersReady(t *testing.T) {
	needRealNode(t, "kubelet", "containerd")
	before := map[string]string{}
	for _, k := range kubeletSysctls() {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			t.Fatal(err)
		}
		before[k] = string(v)
	}

	ctx, c, cfg := ForTest(t, false)
	n, err := c.StartRealNode(ctx, NodeOptions{Name: "real-0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, "real-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := node.Status.NodeInfo.KubeletVersion; v != "v1.37.2" {
		t.Errorf("kubelet version %q, want v1.37.2 (the pinned one, stamped at build)", v)
	}
	repo, err := toolbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(repo, toolbin.ContainerdModule, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// The CRI reports the stamped version without its "v".
	pinned := strings.TrimPrefix(toolbin.RequiredVersion(string(gomod), "github.com/containerd/containerd/v2"), "v")
	if rt := node.Status.NodeInfo.ContainerRuntimeVersion; rt != "containerd://"+pinned {
		t.Errorf("container runtime %q, want containerd://%s (the one pinned in %s, stamped at build)", rt, pinned, toolbin.ContainerdModule)
	}
	var internal string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = a.Address
		}
	}
	if internal != n.IP {
		t.Errorf("InternalIP %q, want %q", internal, n.IP)
	}

	root, kubelet, containerd := n.Root, n.kubelet, n.containerd
	n.Stop()
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the node's root %s is still there (%v)", root, err)
	}
	for name, p := range map[string]*process{"kubelet": kubelet, "containerd": containerd} {
		if gone, _ := p.exited(); !gone {
			t.Errorf("%s still runs after Stop", name)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), root) {
		t.Errorf("mounts under %s left after Stop", root)
	}
	if _, err := os.Lstat(deviceManagerSocket); !os.IsNotExist(err) {
		t.Errorf("kubelet's device-plugin socket %s left after Stop (%v)", deviceManagerSocket, err)
	}
	for k, v := range before {
		got, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		if string(got) != v {
			t.Errorf("sysctl %s = %q after Stop, want %q as before", k, got, v)
		}
	}
}

// needRealNode skips t where no real node can run (or with -short), and
// builds the named tools binaries first: a cold kubelet build takes about
// 20 minutes on two cores, before the control plane's own deadline starts.
func needRealNode(t *testing.T, binaries ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds kubelet and containerd and starts them")
	}
	if why := RealNodeUnavailable(); why != "" {
		t.Skip(why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	for _, b := range binaries {
		if _, err := toolbin.Binary(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
}
