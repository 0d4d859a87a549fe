package podstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tessera-gpu/tessera/binding"
)

// Sink reports scheduling outcomes as Events and pod conditions, once
// per pod and message, so a pod that stays pending does not flood the API.
//
// Once started (the scheduler's Run does), the PodScheduled conditions are written by a
// few workers, not by the cycle that decided them: a cycle that leaves
// pods pending (a gang waiting for members is left pending again, with a
// new count, each time one arrives) would otherwise wait for a round trip
// per pod while the pods behind it wait for the cycle. A pod's writes are
// coalesced (only its latest condition is written if several were decided
// while it waited), and a pod about to be bound has its queued write
// dropped and waits for the one in flight (Settle), so a stale
// PodScheduled=False never lands on a bound pod; a pod whose gang is still
// missing members is reported only after gangWaitGrace (Waiting). Not
// started, Reject and Waiting write at once (tests that drive cycles by
// hand).
type Sink struct {
	client   kubernetes.Interface
	log      *slog.Logger
	bcast    record.EventBroadcaster
	recorder record.EventRecorder

	mu   sync.Mutex
	last map[types.UID]string
	// want is each pod's latest condition not yet written, busy the pods
	// whose write is in flight (closed when it ends); queue holds the pods
	// with a write wanted (a pod is in it at most once).
	want    map[types.UID]condWrite
	busy    map[types.UID]chan struct{}
	queue   workqueue.TypedDelayingInterface[types.UID]
	writers sync.WaitGroup
	// clock times the grace of waiting gangs (tests set a fake one).
	clock clock.WithTicker
}

// condWrite is one PodScheduled=False condition to write, and the
// Warning event to record with it when it was held back (Waiting).
type condWrite struct {
	namespace, name string
	reason, msg     string
	at              metav1.Time
	event           *corev1.Pod
}

// gangWaitGrace is how long a pod of a gang still missing members waits
// before its condition and event say so. Members created together arrive
// within milliseconds, and one by one a gang's members may take a while,
// each arrival changing the count the message gives: without the grace,
// every member's condition would be written again on every arrival (a
// gang of eight arriving one by one: 28 writes and events), loading the
// API server that every pod's binding goes through. Within the grace,
// only a pod's latest message is written, once, and none if the gang is
// placed first.
const gangWaitGrace = time.Second

// Writers is how many condition writes are in flight at once.
const Writers = 4

// New posts Events through events and patches pod conditions
// through c.
func New(events, c kubernetes.Interface, component string, log *slog.Logger) *Sink {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	return &Sink{
		client: c, log: log, bcast: b, last: map[types.UID]string{},
		want: map[types.UID]condWrite{}, busy: map[types.UID]chan struct{}{}, clock: clock.RealClock{},
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}),
	}
}

// Start writes conditions on workers from now until Stop; ctx bounds the
// writes.
func (e *Sink) Start(ctx context.Context, workers int) {
	q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.UID]{Clock: e.clock})
	e.mu.Lock()
	e.queue = q
	e.mu.Unlock()
	for range workers {
		e.writers.Add(1)
		go func() {
			defer e.writers.Done()
			for {
				uid, quit := q.Get()
				if quit {
					return
				}
				e.writeQueued(ctx, uid)
				q.Done(uid)
			}
		}()
	}
}

// writeQueued writes the pod's latest wanted condition, if it still has one.
func (e *Sink) writeQueued(ctx context.Context, uid types.UID) {
	e.mu.Lock()
	w, ok := e.want[uid]
	if !ok {
		e.mu.Unlock()
		return
	}
	delete(e.want, uid)
	done := make(chan struct{})
	e.busy[uid] = done
	e.mu.Unlock()
	e.write(ctx, w)
	e.mu.Lock()
	delete(e.busy, uid)
	e.mu.Unlock()
	close(done)
}

// Stop ends the condition workers (after the writes queued) and the
// event broadcaster.
func (e *Sink) Stop() {
	e.mu.Lock()
	q := e.queue
	e.queue = nil
	e.mu.Unlock()
	if q != nil {
		q.ShutDown()
		e.writers.Wait()
	}
	e.bcast.Shutdown()
}

// Reject leaves the pod pending with a Warning event and a PodScheduled=False
// condition carrying the reason and message.
func (e *Sink) Reject(ctx context.Context, pod *corev1.Pod, reason, msg string) {
	e.report(ctx, pod, reason, msg, 0)
}

// Waiting is Reject for a pod whose gang is still missing members: once
// started, the sink says so only after gangWaitGrace, with the pod's
// latest message, unless the pod is bound (Settle) first.
func (e *Sink) Waiting(ctx context.Context, pod *corev1.Pod, reason, msg string) {
	e.report(ctx, pod, reason, msg, gangWaitGrace)
}

// report records the event and writes the condition, now or after delay.
func (e *Sink) report(ctx context.Context, pod *corev1.Pod, reason, msg string, delay time.Duration) {
	e.mu.Lock()
	if e.last[pod.UID] == reason+msg {
		e.mu.Unlock()
		return
	}
	e.last[pod.UID] = reason + msg
	w := condWrite{namespace: pod.Namespace, name: pod.Name, reason: reason, msg: msg, at: metav1.Now()}
	q := e.queue
	held := q != nil && delay > 0
	if held {
		w.event = pod
	}
	if q != nil {
		e.want[pod.UID] = w
	}
	e.mu.Unlock()
	e.log.Debug("pod left pending", "pod", pod.Namespace+"/"+pod.Name, "reason", reason, "message", msg)
	if !held {
		e.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	}
	switch {
	case q == nil:
		e.write(ctx, w)
	case held:
		q.AddAfter(pod.UID, delay)
	default:
		q.Add(pod.UID)
	}
}

// write patches the pod's PodScheduled condition (and records the event
// held back with it).
func (e *Sink) write(ctx context.Context, w condWrite) {
	if w.event != nil {
		e.recorder.Event(w.event, corev1.EventTypeWarning, "FailedScheduling", w.msg)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": string(corev1.PodScheduled), "status": string(corev1.ConditionFalse),
		"reason": w.reason, "message": w.msg, "lastTransitionTime": w.at,
	}}}})
	if err == nil {
		_, err = e.client.CoreV1().Pods(w.namespace).Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	if err != nil && !apierrors.IsNotFound(err) {
		e.log.Warn("could not set the pod's PodScheduled condition", "pod", w.namespace+"/"+w.name, "err", err)
	}
}

// Settle is called before the pod is bound: its condition not yet written
// is dropped, and a write in flight is waited for (or ctx's end).
func (e *Sink) Settle(ctx context.Context, uid types.UID) {
	e.mu.Lock()
	delete(e.want, uid)
	done := e.busy[uid]
	e.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Bound records a Normal event naming the node and GPUs.
func (e *Sink) Bound(_ context.Context, pod *corev1.Pod, node string, a binding.Assignment) {
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

// Forget forgets what was reported on a pod that is gone.
func (e *Sink) Forget(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.last, uid)
	delete(e.want, uid)
}

// Preempted records a Warning event on a preemption victim saying why it
// is evicted.
func (e *Sink) Preempted(victim *corev1.Pod, msg string) {
	e.recorder.Event(victim, corev1.EventTypeWarning, "Preempted", msg)
}
