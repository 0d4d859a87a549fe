package podbind

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/binding"
)

// Workers is how many bindings a scheduler keeps in flight. With no
// client rate limit the round trips to the API server bound the bind
// rate: at 5,000 nodes 16 in flight gave 304 pods/s and 64 gave 424
// (docs/benchmarks.md, the mix scenario); under a rate limit the extra
// ones wait on the client's limiter.
const Workers = 64

// Bind records the assignment (enc; "" for a pod granted no GPU) and binds
// the pod to node in one call: the API server copies a Binding's
// annotations onto the pod as it sets the node, so a pod is never bound
// without its assignment, nor annotated but left unbound by a crash in
// between.
func Bind(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, node, enc string) error {
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

// Pool runs bindings on workers so that a scheduling cycle does not wait
// for API round trips (the cycle has already booked each pod).
type Pool struct {
	ctx  context.Context
	jobs chan func(context.Context)
	wg   sync.WaitGroup
}

// Start starts workers that run submitted jobs with ctx until Stop.
func Start(ctx context.Context, workers int) *Pool {
	p := &Pool{ctx: ctx, jobs: make(chan func(context.Context), 4*workers)}
	for range workers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for job := range p.jobs {
				job(ctx)
			}
		}()
	}
	return p
}

// Submit queues a job; it blocks while every worker is busy and the queue
// is full (back-pressure on the cycle).
func (p *Pool) Submit(job func(context.Context)) { p.jobs <- job }

// Go runs a long job (one that waits on others, as a binding waits for
// its volumes to be provisioned) on a goroutine of its own, so that it
// holds no worker; Stop waits for it too.
func (p *Pool) Go(job func(context.Context)) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		job(p.ctx)
	}()
}

// Stop waits for the queued jobs to finish.
func (p *Pool) Stop() {
	close(p.jobs)
	p.wg.Wait()
}

// Settle decides what a failed binding of pod did, and reports whether
// the pod turned out bound, as read back.
//
// A binding can fail after the API server applied it: its answer is lost
// when the server stops mid-request, and a later attempt is refused
// because the pod is already bound. Forgetting such a pod would show its
// GPUs free until the informer catches up (after a relist, seconds
// later), and the next cycles would place other pods on them. So the pod
// is read back: bound, the caller keeps it booked as read (on its real
// node and GPUs); unbound or gone, it is scheduled again. While the API
// server cannot answer, the read is retried (the pod stays booked where it
// was planned meanwhile).
func Settle(ctx context.Context, c kubernetes.Interface, log *slog.Logger, pod *corev1.Pod, bindErr error) (*corev1.Pod, bool) {
	wait := 100 * time.Millisecond
	for {
		cur, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case err == nil && cur.UID == pod.UID && cur.Spec.NodeName != "":
			log.Info("binding failed but the pod is bound (the answer was lost); keeping its node's resources booked",
				"pod", pod.Namespace+"/"+pod.Name, "node", cur.Spec.NodeName, "err", bindErr)
			return cur, true
		case err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil:
			return nil, false
		}
		log.Debug("cannot read back a pod whose binding failed; keeping it booked", "pod", pod.Namespace+"/"+pod.Name, "err", err, "retry in", wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
