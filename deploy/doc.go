// Package deploy holds Tessera's Kubernetes manifests (CRDs, RBAC, the
// scheduler Deployment and the agent DaemonSet). Its Go files only test that
// a real API server accepts every object; nothing imports it.
package deploy
