// Package deploy holds Tessera's Kubernetes manifests (CRDs, RBAC, the
// scheduler Deployment, the agent DaemonSet and the optional admission
// webhook). Its Go files only test that
// a real API server accepts every object; nothing imports it.
package deploy
