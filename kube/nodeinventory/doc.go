// Package nodeinventory reads the GPUs of a Kubernetes node for the
// scheduler: from its GPUNode object (published by the Tessera agent),
// else from its tessera.io/gpu-count and tessera.io/gpu-model labels; a
// cache of answers per node object version; and the version of an
// answer, so a snapshot kept across cycles reads only the nodes that
// changed.
//
// It reads only; it must not watch (the scheduler's informers do), book
// or decide.
package nodeinventory
