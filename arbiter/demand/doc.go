// Package demand turns what the arbiter saw of a client on one GPU during
// the last period (launches consumed, whether it waited for tokens) into
// its demand for the next period, and implements idle reclaim.
//
// A client that waited, or used up its tokens, is busy: its demand is the
// whole GPU (package share caps it at its limit). One that launched without
// running out demands what it used plus Headroom. One that launched nothing
// is idle: its demand is 0, so its share goes to busy clients at once (work
// conservation), but it keeps a cushion, a standing token balance sized in
// thousandths of the GPU for one period, so that it can run at once when it
// wakes up. For IdleAfter after its last activity the cushion is the share
// it last had (its burst); after that the burst is withdrawn and the
// cushion is its guarantee alone (idle reclaim).
//
// The package is pure: time comes in as arguments. It must not allocate
// shares, compute tokens or touch files.
package demand
