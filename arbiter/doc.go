// Package arbiter is Tessera's node compute arbiter (issue 7, Go half): it
// publishes a grant region for every registered container, and every period
// splits each GPU's time between its clients and turns the split into
// launch tokens that libtessera-intercept draws on.
//
// One Step, per GPU: beat every region; read each client's record (tokens
// consumed, waiters) and, when a Meter is set, its measured GPU time; adjust
// its token rate (package rate); classify its demand and apply idle reclaim
// (package demand); read working sets from the accounting files and switch
// the GPU between shared and exclusive time slices when memory is
// oversubscribed (package thrash); split the GPU (package share); refill or
// revoke tokens (package grant). Run calls Step every Period on an
// injectable clock until its context ends. The Meter's readings also fill
// each client's use windows and the idle-holder rule (package gpuuse,
// SeatStatus.Use and Idle); a simulated meter's (Reading.Simulated) fill
// only those, labelled simulated, and never move a launch rate. A seat
// marked idle (by measured or simulated windows alike) lends its guarantee
// unless Config.KeepIdleGuarantee: the split keeps it only its IdleFloor
// and fills it last, and the step that ends the mark gives it back.
//
// In ModeMPS the split is left to NVIDIA MPS instead (package arbiter/mps):
// Run also supervises one MPS control daemon per GPU, every client's
// region is kept ungated, and ClientEnv gives the MPS caps (active thread
// percentage from the compute limit, pinned memory limit) a client must be
// started with.
//
// The package owns the node's grant regions and the policy state. It must
// not write accounting files, start or stop containers, or decide
// placements; the node agent or host daemon calls Register and Unregister.
// docs/enforcement.md, "The Go arbiter", describes the design and wiring.
package arbiter
