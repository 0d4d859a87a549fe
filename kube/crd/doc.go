// Package crd installs CustomResourceDefinitions from embedded manifests
// and waits until the API server serves them. Packages that own a resource
// (kube/gpunode, kube/queues) embed their manifest and call Install.
//
// It must not know any particular resource.
package crd
