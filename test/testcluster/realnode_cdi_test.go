package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	dpapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/tessera-gpu/tessera/test/toolbin"
)

// The CDI device the test hands a container: its spec's edits (an
// environment variable and a read-only bind mount of a host folder) must
// reach the running container.
const (
	cdiKind     = "test.tessera.io/cdi"
	cdiDevice   = "dev0"
	cdiEnv      = "TESSERA_CDI_TEST=edits-applied"
	cdiMountDir = "/cdi-test"
	cdiToken    = "from the CDI spec's mount\n"
)

// TestRealNodeAppliesCDIDevices runs a pod on the real node whose container
// gets a CDI device, named by a device plugin's AllocateResponse (the way
// kubelet passes CDI devices to the runtime without DRA), and checks that
// containerd applied the device's CDI spec, read from the node's CDI
// folder: the container's process has the spec's environment variable and
// sees the host file the spec mounts.
func TestRealNodeAppliesCDIDevices(t *testing.T) {
	needRealNode(t, "kubelet", "containerd")
	pause := pauseImage(t)

	ctx, c, cfg := ForTest(t, false)
	n, err := c.StartRealNode(ctx, NodeOptions{Name: "real-0", Images: []string{pause}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	hostDir := filepath.Join(n.Root, "cdi-host")
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostDir, "token"), []byte(cdiToken), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`{
  "cdiVersion": "0.6.0",
  "kind": %q,
  "devices": [{
    "name": %q,
    "containerEdits": {
      "env": [%q],
      "mounts": [{"hostPath": %q, "containerPath": %q, "type": "bind", "options": ["ro", "rbind"]}]
    }
  }]
}
`, cdiKind, cdiDevice, cdiEnv, hostDir, cdiMountDir)
	if err := os.WriteFile(filepath.Join(n.CDIDir, "tessera-test.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}

	startCDIPlugin(ctx, t)
	waitFor(ctx, t, "the node to offer "+cdiKind, func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q := node.Status.Allocatable[corev1.ResourceName(cdiKind)]; q.Value() != 1 {
			return fmt.Errorf("allocatable %s = %s", cdiKind, q.String())
		}
		return nil
	})

	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cdi", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      n.Name,
			HostNetwork:                   true, // loopback CNI only
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceName(cdiKind): resource.MustParse("1")}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var containerID string
	waitFor(ctx, t, "the pod to run", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "cdi", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) > 0 {
			// An unresolvable CDI device fails the container's creation:
			// kubelet retries forever, so fail now, with containerd's word.
			if w := p.Status.ContainerStatuses[0].State.Waiting; w != nil && (w.Reason == "CreateContainerError" || w.Reason == "RunContainerError") {
				t.Fatalf("the container did not start: %s: %s", w.Reason, w.Message)
			}
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].ContainerID == "" {
			return fmt.Errorf("pod %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		containerID = strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		return nil
	})

	pid := taskPID(ctx, t, n, containerID)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\x00"+string(environ)+"\x00", "\x00"+cdiEnv+"\x00") {
		t.Errorf("the container's environment lacks the CDI spec's %s: %q", cdiEnv, strings.ReplaceAll(string(environ), "\x00", " "))
	}
	got, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s/token", pid, cdiMountDir))
	if err != nil {
		t.Errorf("the container does not see the CDI spec's mount at %s: %v", cdiMountDir, err)
	} else if string(got) != cdiToken {
		t.Errorf("%s/token in the container = %q, want %q (the host file the CDI spec mounts)", cdiMountDir, got, cdiToken)
	}
}

// TestContainerdConfigAsContainerdReadsIt runs the built containerd's
// `config dump` on the configuration StartRealNode writes and checks the
// settings containerd ends up with after migrating it: a misspelt section
// or key would be dropped silently and leave containerd's default. It
// needs neither root nor a running containerd.
func TestContainerdConfigAsContainerdReadsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds containerd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	bin, err := toolbin.Binary(ctx, "containerd")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	const pause, shim = "example.com/pause:1", "/opt/test/containerd-shim-runc-v2"
	cfg := filepath.Join(root, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig(root, pause, shim)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "--config", cfg, "config", "dump").Output()
	if err != nil {
		t.Fatalf("containerd config dump: %v", err)
	}
	got := tomlKeys(string(out))
	const rt = "plugins.'io.containerd.cri.v1.runtime'"
	const runc = rt + ".containerd.runtimes.runc"
	want := map[string]string{
		"version": "4", // migrated to containerd 2.4's latest
		"root":    fmt.Sprintf("'%s/containerd/root'", root),
		"plugins.'io.containerd.server.v1.grpc'.address":              fmt.Sprintf("'%s/containerd/containerd.sock'", root),
		"plugins.'io.containerd.cri.v1.images'.snapshotter":           "'overlayfs'",
		"plugins.'io.containerd.cri.v1.images'.pinned_images.sandbox": "'" + pause + "'",
		rt + ".cdi_spec_dirs":                                       fmt.Sprintf("['/etc/cdi', '/var/run/cdi', '%s/cdi']", root),
		rt + ".restrict_oom_score_adj":                              "true",
		rt + ".disable_apparmor":                                    "true",
		rt + ".netns_mounts_under_state_dir":                        "true",
		rt + ".containerd.default_runtime_name":                     "'runc'",
		runc + ".runtime_type":                                      "'io.containerd.runc.v2'",
		runc + ".runtime_path":                                      "'" + shim + "'",
		runc + ".options.BinaryName":                                "'" + runcBin + "'",
		runc + ".options.SystemdCgroup":                             "false",
		rt + ".cni.bin_dirs":                                        "['" + cniBinDir + "']",
		rt + ".cni.conf_dir":                                        fmt.Sprintf("'%s/cni/net.d'", root),
		"plugins.'io.containerd.grpc.v1.cri'.stream_server_address": "'127.0.0.1'",
		"plugins.'io.containerd.internal.v1.opt'.path":              fmt.Sprintf("'%s/containerd/opt'", root),
		"plugins.'io.containerd.nri.v1.nri'.disable":                "true",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("containerd reads %s = %q, want %q", k, got[k], v)
		}
	}
	if t.Failed() {
		t.Logf("containerd config dump:\n%s", out)
	}
}

// tomlKeys flattens `containerd config dump`'s TOML (one key = value a
// line, tables as [a.b] headers) into "table.key" -> the value as written.
func tomlKeys(dump string) map[string]string {
	keys := map[string]string{}
	table := ""
	for _, line := range strings.Split(dump, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			table = strings.Trim(line, "[]")
		case strings.Contains(line, " = "):
			k, v, _ := strings.Cut(line, " = ")
			if table != "" {
				k = table + "." + k
			}
			keys[k] = v
		}
	}
	return keys
}

// pauseImage builds the pause image (make pause-image) and returns its
// archive.
func pauseImage(t *testing.T) string {
	t.Helper()
	root, err := toolbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("make", "-s", "--no-print-directory", "pause-image", "IMAGE_DIR="+dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make pause-image: %v\n%s", err, out)
	}
	return filepath.Join(dir, "pause-image.tar")
}

// taskPID returns the PID of a container's task, from ctr tasks ls.
func taskPID(ctx context.Context, t *testing.T, n *RealNode, id string) int {
	t.Helper()
	out, err := n.Ctr(ctx, "tasks", "ls")
	if err != nil {
		t.Fatalf("ctr tasks ls: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == id {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("ctr tasks ls: PID of %s: %v", id, err)
			}
			return pid
		}
	}
	t.Fatalf("ctr tasks ls lists no task %s:\n%s", id, out)
	return 0
}

// waitFor polls check until it succeeds or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cdiPlugin is a device plugin with one device whose allocation names the
// CDI device cdiKind=cdiDevice.
type cdiPlugin struct {
	dpapi.UnimplementedDevicePluginServer
}

func (cdiPlugin) GetDevicePluginOptions(context.Context, *dpapi.Empty) (*dpapi.DevicePluginOptions, error) {
	return &dpapi.DevicePluginOptions{}, nil
}

func (cdiPlugin) ListAndWatch(_ *dpapi.Empty, s grpc.ServerStreamingServer[dpapi.ListAndWatchResponse]) error {
	if err := s.Send(&dpapi.ListAndWatchResponse{Devices: []*dpapi.Device{{ID: cdiDevice, Health: dpapi.Healthy}}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (cdiPlugin) Allocate(_ context.Context, req *dpapi.AllocateRequest) (*dpapi.AllocateResponse, error) {
	resp := &dpapi.AllocateResponse{}
	for range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &dpapi.ContainerAllocateResponse{
			CdiDevices: []*dpapi.CDIDevice{{Name: cdiKind + "=" + cdiDevice}},
		})
	}
	return resp, nil
}

// startCDIPlugin serves cdiPlugin in kubelet's device-plugin folder and
// registers it with kubelet; the test's cleanup stops it.
func startCDIPlugin(ctx context.Context, t *testing.T) {
	t.Helper()
	const endpoint = "tessera-cdi-test.sock"
	sock := filepath.Join(dpapi.DevicePluginPath, endpoint)
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	dpapi.RegisterDevicePluginServer(srv, cdiPlugin{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		_ = os.Remove(sock)
	})
	conn, err := grpc.NewClient("unix://"+dpapi.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := dpapi.NewRegistrationClient(conn).Register(ctx, &dpapi.RegisterRequest{
		Version: dpapi.Version, Endpoint: endpoint, ResourceName: cdiKind,
	}); err != nil {
		t.Fatalf("register the device plugin with kubelet: %v", err)
	}
}
