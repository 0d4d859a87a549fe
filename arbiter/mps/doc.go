// Package mps runs NVIDIA's Multi-Process Service for the arbiter's ModeMPS:
// one MPS control daemon per GPU (nvidia-cuda-mps-control -d, with
// CUDA_VISIBLE_DEVICES set to the GPU and its own CUDA_MPS_PIPE_DIRECTORY
// and CUDA_MPS_LOG_DIRECTORY under a root folder), supervised: a daemon that
// stops answering on its control pipe is started again with exponential
// backoff, one already running (left by an earlier agent) is adopted, and
// every daemon is stopped with "quit" on its control pipe when Run's
// context ends.
//
// Per-client limits go in the client's environment (ClientEnv):
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE from the share's compute limit and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT from its memory limit. MPS can only cap:
// a share's guarantee holds only while the limits of the clients on a GPU
// sum to at most 100 % (docs/enforcement.md, "MPS mode").
//
// The package starts and stops MPS daemons and computes client settings. It
// must not start or stop clients, change a GPU's compute mode or decide
// placements.
package mps
