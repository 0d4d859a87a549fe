// Package acct reads the interception library's per-container memory
// accounting file, layout 1.0 ($TESSERA_SHM_DIR/tessera-<id>.acct, see
// docs/enforcement.md, "Accounting file"), as monitoring: it maps the file
// read-only and sums the live slots' per-device bytes with 64-bit atomic
// loads, without the lock.
//
// It must never write the file or take its mutex: only library instances
// do. Dead processes' slots are reclaimed by the library, not here, so a
// sum may briefly include a process that has just died.
package acct
