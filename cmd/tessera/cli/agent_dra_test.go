package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/agent/cdi"
	kdra "github.com/tessera-gpu/tessera/kube/dra"
)

// checkDRAAgent runs `tessera agent --dra` for another node of the
// cluster: it publishes the node's slices (implied), registers its kubelet
// plugin, and prepares a claim the API server stores with an allocation on
// the node (0.5 of GPU 0, burst 0.8), called as kubelet calls it: the
// answer names the claim's CDI device, whose spec holds the share's
// variables; unprepare removes it.
func checkDRAAgent(ctx context.Context, t *testing.T, kubeconfig string, core kubernetes.Interface) {
	t.Helper()
	const node = "gpu-node-2"
	if _, err := core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir, _, stopKubelet := startKubelet(t, "td")
	defer stopKubelet()
	pluginDir, registry, cdiDir := filepath.Join(dir, "plug"), filepath.Join(dir, "reg"), filepath.Join(dir, "cdi")
	if err := os.MkdirAll(registry, 0o755); err != nil {
		t.Fatal(err)
	}
	metricsAddr := freeLoopbackAddr(t)
	stderr, stopAgent := runAgent(ctx, t, "DRA agent", agentArgs(node, "sim:1xH100-SXM", kubeconfig, dir, metricsAddr, "--install-crd=false",
		"--dra", "--dra-plugin-dir", pluginDir, "--dra-registry-dir", registry, "--cdi-spec-dir", cdiDir))
	defer stopAgent()
	var gpu string
	eventually(ctx, t, "the node's ResourceSlice (--dra implies --dra-publish)", func() error {
		l, err := core.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 || len(l.Items[0].Spec.Devices) != 1 {
			return fmt.Errorf("slices of %s: %d, want one with one device", node, len(l.Items))
		}
		gpu = *l.Items[0].Spec.Devices[0].Attributes[kdra.AttrUUID].StringValue
		return nil
	})
	eventually(ctx, t, "the plugin's registration socket", func() error {
		_, err := os.Stat(filepath.Join(registry, kdra.DriverName+"-reg.sock"))
		return err
	})

	params := runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.tessera.io/v1alpha1","kind":"ShareConfig","computeLimit":"0.8"}`)}
	cfg := resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: kdra.DriverName, Parameters: params}}
	claim, err := core.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "half", Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "shared-gpu.tessera.io",
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{kdra.CapacityCompute: resource.MustParse("0.5")}}}}},
			Config: []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: cfg}},
		}},
	}, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	shareID := types.UID("0f8e2d1c-3b4a-4c5d-9e6f-7a8b9c0d1e2f")
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "trainer", UID: "pod-uid-1"}}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: kdra.DriverName, Pool: node, Device: "gpu-0", ShareID: &shareID,
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{kdra.CapacityCompute: resource.MustParse("500m")}}},
		Config: []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"}, DeviceConfiguration: cfg}},
	}}
	if claim, err = core.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatal(err)
	}

	conn, err := grpc.NewClient("unix://"+filepath.Join(pluginDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kubelet := drapb.NewDRAPluginClient(conn)
	ref := []*drapb.Claim{{Namespace: "default", Name: "half", Uid: string(claim.UID)}}
	resp, err := kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: ref}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("NodePrepareResources: %v\n%s", err, stderr.String())
	}
	r := resp.Claims[string(claim.UID)]
	if r == nil || r.Error != "" || len(r.Devices) != 1 || !slices.Equal(r.Devices[0].CdiDeviceIds, []string{"gpu.tessera.io/claim=" + string(claim.UID)}) {
		t.Fatalf("prepare answered %v", r)
	}
	spec := filepath.Join(cdiDir, "gpu.tessera.io-claim_"+string(claim.UID)+".json")
	raw, err := os.ReadFile(spec)
	if err != nil {
		t.Fatalf("claim's CDI spec: %v", err)
	}
	var s cdi.Spec
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Devices) != 1 {
		t.Fatalf("claim's CDI spec %s: %v", raw, err)
	}
	env := s.Devices[0].ContainerEdits.Env
	for _, want := range []string{"TESSERA_COMPUTE_REQUEST=500m", "TESSERA_COMPUTE_LIMIT=800m", "CUDA_VISIBLE_DEVICES=" + gpu, "TESSERA_CONTAINER_ID=dra-" + string(claim.UID)} {
		if !slices.Contains(env, want) {
			t.Errorf("claim's env lacks %s: %v", want, env)
		}
	}
	// The agent's metrics carry the claim's share like a container's.
	series := `tessera_container_gpu_compute_limit_ratio{container="claim/half",gpu="0",namespace="default",node="gpu-node-2",pod="trainer",uuid="` + gpu + `"} 0.8`
	scrapeUntil(ctx, t, "the claim's share in the metrics", metricsAddr, series)
	uresp, err := kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: ref})
	if err != nil || uresp.Claims[string(claim.UID)].GetError() != "" {
		t.Fatalf("NodeUnprepareResources: %v, %v", uresp, err)
	}
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		t.Errorf("claim's CDI spec after unprepare: %v", err)
	}
}
