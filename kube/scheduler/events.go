package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/tessera-gpu/tessera/binding"
)

// Reasons on events and on the PodScheduled condition.
const (
	reasonInvalid       = "InvalidGPURequest"
	reasonUnschedulable = corev1.PodReasonUnschedulable
	// reasonSchedulerError: the decision was made but could not be carried
	// out (the API refused the binding); kube-scheduler's reason too.
	reasonSchedulerError = corev1.PodReasonSchedulerError
)

// eventSink reports scheduling outcomes as Events and pod conditions, once
// per pod and message, so a pod that stays pending does not flood the API.
type eventSink struct {
	client   kubernetes.Interface
	log      *slog.Logger
	bcast    record.EventBroadcaster
	recorder record.EventRecorder

	mu   sync.Mutex
	last map[types.UID]string
}

// newEventSink posts Events through events and patches pod conditions
// through c.
func newEventSink(events, c kubernetes.Interface, component string, log *slog.Logger) *eventSink {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	return &eventSink{
		client: c, log: log, bcast: b, last: map[types.UID]string{},
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}),
	}
}

func (e *eventSink) stop() { e.bcast.Shutdown() }

// reject leaves the pod pending with a Warning event and a PodScheduled=False
// condition carrying the reason and message.
func (e *eventSink) reject(ctx context.Context, pod *corev1.Pod, reason, msg string) {
	e.mu.Lock()
	if e.last[pod.UID] == reason+msg {
		e.mu.Unlock()
		return
	}
	e.last[pod.UID] = reason + msg
	e.mu.Unlock()
	e.log.Debug("pod left pending", "pod", pod.Namespace+"/"+pod.Name, "reason", reason, "message", msg)
	e.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": string(corev1.PodScheduled), "status": string(corev1.ConditionFalse),
		"reason": reason, "message": msg, "lastTransitionTime": metav1.Now(),
	}}}})
	if err == nil {
		_, err = e.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	if err != nil {
		e.log.Warn("could not set the pod's PodScheduled condition", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// bound records a Normal event naming the node and GPUs.
func (e *eventSink) bound(_ context.Context, pod *corev1.Pod, node string, a binding.Assignment) {
	e.mu.Lock()
	delete(e.last, pod.UID)
	e.mu.Unlock()
	gpus := 0
	for _, c := range a.Containers {
		gpus += len(c.GPUs)
	}
	msg := fmt.Sprintf("Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node)
	if gpus > 0 {
		msg += fmt.Sprintf(" with %d GPU share(s)", gpus)
	}
	e.recorder.Event(pod, corev1.EventTypeNormal, "Scheduled", msg)
}

// gc forgets what was reported on pods that are gone (seen: the pods that
// exist).
func (e *eventSink) gc(seen map[types.UID]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for uid := range e.last {
		if !seen[uid] {
			delete(e.last, uid)
		}
	}
}
