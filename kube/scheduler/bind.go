package scheduler

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/binding"
)

// bindWorkers is how many bindings are in flight at once. With no client
// rate limit the round trips to the API server bound the bind rate: at
// 5,000 nodes 16 in flight gave 304 pods/s and 64 gave 424
// (docs/benchmarks.md, the mix scenario); under a rate limit the extra
// ones wait on the client's limiter.
const bindWorkers = 64

// bind records the assignment (enc; "" for a pod granted no GPU) and binds
// the pod to node in one call: the API server copies a Binding's
// annotations onto the pod as it sets the node, so a pod is never bound
// without its assignment, nor annotated but left unbound by a crash in
// between.
func bind(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, node, enc string) error {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if enc != "" {
		b.Annotations = map[string]string{binding.AnnotationKey: enc}
	}
	if err := c.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind pod %s/%s to node %s: %w", pod.Namespace, pod.Name, node, err)
	}
	return nil
}

// binder runs bindings on a pool of workers so that a cycle does not wait
// for API round trips; the cycle has already booked and assumed each pod.
type binder struct {
	jobs chan func(context.Context)
	wg   sync.WaitGroup
}

func startBinder(ctx context.Context, workers int) *binder {
	b := &binder{jobs: make(chan func(context.Context), 4*workers)}
	for i := 0; i < workers; i++ {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for job := range b.jobs {
				job(ctx)
			}
		}()
	}
	return b
}

// submit queues a binding; it blocks while every worker is busy and the
// queue is full (back-pressure on the cycle).
func (b *binder) submit(job func(context.Context)) { b.jobs <- job }

// stop waits for queued bindings to finish.
func (b *binder) stop() {
	close(b.jobs)
	b.wg.Wait()
}
