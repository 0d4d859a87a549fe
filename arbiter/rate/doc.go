// Package rate turns a client's time share into launch tokens, and keeps
// the exchange rate between the two honest with measured GPU time.
//
// A token is one kernel (or graph) launch, a proxy for GPU time whose worth
// depends on the client's kernels: 1 000 tokens are 20 ms of GPU for 20 µs
// kernels and 1 s for 1 ms kernels. Each client therefore has its own rate,
// in launches per second of whole-GPU time. Every period the arbiter grants
// rate × share/1000 × period tokens (fractions carried over). When GPU time
// is measured (NVML per-process samples, through the arbiter's Meter), the
// arbiter sums a client's launches and measured busy time over a window
// (about a second, and enough readings that found the client busy) and
// Update estimates the rate as launches ÷ busy seconds, a ratio of sums:
// NVML attributes each ~200 ms tick wholly to one process, so per-reading
// ratios are badly biased while the sums are not. The first estimate
// replaces the static rate; later ones move the rate with an exponentially
// weighted step (Gain, bounded by MaxStep per update and [MinRate,
// MaxRate]); with no measurement the rate stays where it is, starting at
// the documented StaticRate. Because the estimate is launches per
// GPU-second of the client's own kernels, it is right whether or not the
// client used all its tokens, and the achieved time shares converge on the
// targets (sim_test.go drives a simulated GPU).
//
// The package is pure: no clocks, files or devices. It must not decide
// shares (package share does) or touch grant files (package grant does).
package rate
