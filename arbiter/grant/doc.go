// Package grant writes the compute grant region, version 1.0, that
// libtessera-intercept reads (docs/enforcement.md, "Grant region";
// intercept/src/shm_layout.h): one file per container, a 64-byte header
// and one 64-byte record per device ordinal.
//
// Create builds the file under a temporary name, stores the magic last and
// renames it into place; Region then heartbeats, adds tokens with atomic
// add, revokes them with compare-and-swap towards a lower value, and reads
// the library's counters (waiters, waits, ungated), all with sync/atomic on
// the shared mapping. It never plain-stores tokens after publication.
//
// It owns the file format and the mapping only. It must not decide how many
// tokens to grant (packages share and rate do), and it must never touch the
// library's accounting file.
package grant
