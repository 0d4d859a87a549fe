// Package quantity parses the human and Kubernetes-style amounts Tessera
// accepts on its command line, in pod annotations and in spec files: memory
// sizes ("20Gi", "512Mi", "1.5G") and GPU shares ("0.25", "25%", "250m").
//
// Parsing is exact (no floating point): a value that cannot be represented in
// the target unit is an error, never silently rounded. Range checks that
// depend on meaning (a share must be at most one GPU) belong to callers.
package quantity
