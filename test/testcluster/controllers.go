package testcluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/test/toolbin"
)

// workloadControllers are the kube-controller-manager controllers a real
// node's workload objects need: pods of DaemonSets and Deployments, the
// default service account and the root CA ConfigMap every pod's API token
// volume mounts, Service endpoints (webhooks are called there), and the
// garbage collector (pods go with their owners), and the ResourceClaim
// controller (claims from templates; a claim's reservation and allocation
// released when its pods are gone), and the PersistentVolume binder
// (claims bound to volumes, the scheduler's pick of a WaitForFirstConsumer
// claim's node handed to its provisioner).
func workloadControllers() []string {
	return []string{"daemonset-controller", "deployment-controller", "replicaset-controller", "serviceaccount-controller",
		"root-ca-certificate-publisher-controller", "endpoints-controller", "endpointslice-controller",
		"garbage-collector-controller", "namespace-controller", "job-controller", "resourceclaim-controller",
		PVBinderController}
}

// PVBinderController is kube-controller-manager's PersistentVolume binder
// (Options.Controllers).
const PVBinderController = "persistentvolume-binder-controller"

// disabledAdmission lists the admission plugins a test cluster turns off.
// TaintNodesByCondition always: no node-lifecycle controller would lift the
// not-ready taints it puts on new nodes. ServiceAccount unless Workloads:
// without the service-account controllers nothing creates the accounts it
// checks for.
func disabledAdmission(workloads bool) string {
	if workloads {
		return "TaintNodesByCondition"
	}
	return "ServiceAccount,TaintNodesByCondition"
}

// startControllerManager runs kube-controller-manager with the workload
// controllers (opt.Workloads) and opt.Controllers, as the admin user,
// without leader election.
func (c *Cluster) startControllerManager(ctx context.Context, opt Options) error {
	var controllers []string
	if opt.Workloads {
		controllers = workloadControllers()
	}
	controllers = append(controllers, opt.Controllers...)
	bin, err := toolbin.Binary(ctx, "kube-controller-manager")
	if err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	// The API server's self-signed serving certificate file holds its CA
	// too: that bundle is what pods get as the cluster's root CA.
	rootCA := filepath.Join(c.Dir, "certs", "apiserver.crt")
	args := []string{"--kubeconfig=" + c.Kubeconfig, "--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
		"--controllers=" + strings.Join(controllers, ","), "--leader-elect=false",
		"--root-ca-file=" + rootCA, "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[0]), "--v=0"}
	if len(opt.FeatureGates) > 0 {
		args = append(args, "--feature-gates="+strings.Join(opt.FeatureGates, ","))
	}
	p, err := startProcess("kube-controller-manager", bin, c.Dir, args...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.controllerManager = p
	c.mu.Unlock()
	ready := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]), nil)
		if err != nil {
			return err
		}
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kube-controller-manager /healthz: %s", resp.Status)
		}
		return nil
	}
	return p.waitFor(ctx, ready)
}
