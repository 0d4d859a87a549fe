package scheduler

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// lastApplied is the annotation where `kubectl apply` keeps a copy of the
// whole object it applied; nothing in the scheduler reads it.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimObject is the informers' transform (cache.TransformFunc): before an
// object is cached it drops what the scheduler never reads, so that the
// caches of a large cluster hold less. Every object loses its managedFields
// (server-side apply's field owners, often the largest part of a small
// object); pods lose kubectl's last-applied copy; nodes their image list;
// Jobs everything but their metadata and parallelism (kube/membership reads
// only those). The scheduler writes pods only by patch and binding, never
// by an update of a cached object, so nothing trimmed is written back.
// Objects of other types pass unchanged.
func trimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		o.ManagedFields = nil
		delete(o.Annotations, lastApplied)
	case *corev1.Node:
		o.ManagedFields = nil
		o.Status.Images = nil
	case *batchv1.Job:
		o.ManagedFields = nil
		delete(o.Annotations, lastApplied)
		o.Spec = batchv1.JobSpec{Parallelism: o.Spec.Parallelism}
		o.Status = batchv1.JobStatus{}
	}
	return obj, nil
}
