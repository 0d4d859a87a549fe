// Package intercept holds libtessera-intercept, the C11 CUDA interception
// library that node enforcement loads into every process of a container with
// LD_PRELOAD: it caps device memory across the container's processes, reports
// the cap through cuMemGetInfo, cuDeviceTotalMem and NVML, and gates kernel
// launches on the grants the node arbiter publishes in shared memory.
//
// The library's sources are in src/ and build with make (see Makefile);
// docs/enforcement.md documents its design, environment and shared-memory
// protocol. The Go files in this folder only test it: they build the library,
// a fake libcuda.so.1 and libnvidia-ml.so.1 (testdata/fake) and small C
// programs (testdata/progs) with gcc, run them with LD_PRELOAD, and act as
// the arbiter through the documented layouts. Nothing here is imported by
// other packages.
package intercept
