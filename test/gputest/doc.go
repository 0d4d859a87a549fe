// Package gputest gates the tests that need a real NVIDIA GPU (and the
// tools docs/gpu-validation.md lists) behind one environment variable, so
// that its name and the skip message live in one place. It must not touch
// a GPU itself.
package gputest
