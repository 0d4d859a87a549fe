// Package podgroups owns the PodGroup custom resource (tessera.io/v1alpha1,
// namespaced): its CRD manifest and the conversion of PodGroup objects into
// a gang's minimum and timeout, and the reading of Volcano's PodGroup
// (scheduling.volcano.sh/v1beta1) as unstructured objects: its minimum and
// queue.
//
// It converts and installs only; gang scheduling lives in kube/scheduler.
package podgroups
