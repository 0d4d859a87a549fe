package scheduler

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// settleFailedBind decides what a failed binding of an assumed pod did, and
// reports whether the pod turned out bound, as read back.
//
// A binding can fail after the API server applied it: its answer is lost
// when the server stops mid-request, and a later attempt is refused because
// the pod is already bound. Forgetting such a pod would show its GPUs free
// until the informer catches up (after a relist, seconds later), and the
// next cycles would place other pods on them. So the pod is read back from
// the API server: bound, it stays assumed as read (on its real node and
// GPUs) until the informer shows it bound; unbound or gone, it is
// forgotten and scheduled again. While the API server cannot answer, the
// pod stays assumed where it was planned, and the read is retried.
func settleFailedBind(ctx context.Context, c kubernetes.Interface, log *slog.Logger, pod *corev1.Pod, bindErr error) (*corev1.Pod, bool) {
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
