// Package ctest builds libtessera-intercept, the fake CUDA driver and NVML,
// and the tprog test program from intercept/ (with the flags of
// intercept/Makefile) so that the arbiter's tests can run the real library
// against the files the arbiter writes and read the files it writes.
//
// It is for tests only. It owns nothing under intercept/ and must not change
// it; it only compiles its sources into a temporary folder.
package ctest
