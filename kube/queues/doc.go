// Package queues owns the Queue custom resource (tessera.io/v1alpha1,
// cluster-scoped): its CRD manifest and the conversion of Queue objects into
// the pure queueing.Queue the fair-share rules use.
//
// It converts and installs only; the rules live in package queueing and
// the scheduling in kube/scheduler.
package queues
