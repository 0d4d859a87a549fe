package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tessera-gpu/tessera/test/toolbin"
)

// FakeNodeAnnotation marks nodes KWOK manages: create fake GPU nodes with
// this annotation set to "fake".
const FakeNodeAnnotation = "kwok.x-k8s.io/node"

// stages tells KWOK how to act as a kubelet: mark annotated nodes Ready,
// run pods bound to them, and finish the deletion of pods being deleted.
const stages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: tessera-node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      conditions:
      - type: Ready
        status: "True"
        reason: KubeletReady
        message: "faked by KWOK for Tessera's tests"
        lastHeartbeatTime: {{ Now | Quote }}
        lastTransitionTime: {{ Now | Quote }}
      {{ with .status.allocatable }}
      allocatable:
      {{ YAML . 1 }}
      {{ end }}
      {{ with .status.capacity }}
      capacity:
      {{ YAML . 1 }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: tessera-pod-running
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: NotIn
      values: ["Running", "Succeeded", "Failed"]
  next:
    statusTemplate: |
      phase: Running
      startTime: {{ Now | Quote }}
      conditions:
      - type: Ready
        status: "True"
        lastTransitionTime: {{ Now | Quote }}
      - type: ContainersReady
        status: "True"
        lastTransitionTime: {{ Now | Quote }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ Now | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: tessera-pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: Exists
  next:
    delete: true
`

// StartKWOK starts KWOK against the cluster. It manages nodes annotated
// with FakeNodeAnnotation=fake and the pods bound to them.
func (c *Cluster) StartKWOK(ctx context.Context) error {
	if c.kwok != nil {
		return fmt.Errorf("kwok is already running")
	}
	bin, err := toolbin.Binary(ctx, "kwok")
	if err != nil {
		return err
	}
	cfg := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(cfg, []byte(stages), 0o600); err != nil {
		return fmt.Errorf("write kwok stages: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	c.kwok, err = startProcess("kwok", bin, c.Dir,
		"--kubeconfig="+c.Kubeconfig, "--config="+cfg,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector="+FakeNodeAnnotation+"=fake",
		"--node-ip=127.0.0.1", "--server-address=127.0.0.1:"+strconv.Itoa(ports[0]))
	if err != nil {
		return err
	}
	// KWOK has no readiness endpoint worth trusting here; give it a moment
	// and make sure it did not exit on a bad flag or config.
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if gone, err := c.kwok.exited(); gone {
		return fmt.Errorf("kwok exited (%v); log tail:\n%s", err, c.kwok.logTail(20))
	}
	return nil
}
