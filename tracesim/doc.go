// Package tracesim replays GPU cluster traces (the Alibaba openb traces of
// the FGD study) against placement policies: it loads node and pod lists,
// builds the arrival sequence (seeded shuffle, then random copies up to a
// target share of cluster GPU capacity), places pods one at a time with a
// placement.Policy, and records allocation and fragmentation curves (and,
// when asked, a breakdown of where capacity is left unallocated), then
// writes them as CSV, JSON, Markdown and a plot. Its MIG variant (mig.go)
// replays the same workload on MIG-capable GPUs: it maps pods to MIG
// profiles and builds each setup's cluster, and leaves every placement to
// package placement; the dynamic replay replays it too, with departures
// (dynamic_mig.go).
//
// It owns trace parsing and the replay method. It must not implement
// placement logic (that is package placement) nor scheduling (the dynamic
// replay drives the scheduling core, package dispatch, on a virtual clock;
// only its MIG variant, whose template matching books instances the core
// cannot, keeps an arrival-order loop), nor know about Kubernetes;
// it keeps no package-level mutable state and is deterministic given a seed.
package tracesim
