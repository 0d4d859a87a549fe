// Package podgroups owns the PodGroup custom resource (tessera.io/v1alpha1,
// namespaced): its CRD manifest and the conversion of PodGroup objects into
// a gang's minimum and timeout, and the reading of other systems'
// PodGroups as unstructured objects: Volcano's (scheduling.volcano.sh/v1beta1,
// minimum and queue), scheduler-plugins' (scheduling.x-k8s.io/v1alpha1,
// minimum and timeout; with a CRD manifest for clusters without its own)
// and Kubernetes' Workload API (scheduling.k8s.io/v1beta1, gang or basic
// policy and minCount, converted to k8s.io/api's type).
//
// It converts and installs only; gang scheduling lives in kube/scheduler.
package podgroups
