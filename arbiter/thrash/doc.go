// Package thrash is the anti-thrashing state machine for one GPU whose
// memory is oversubscribed (nvshare's idea, made automatic).
//
// While the working sets of a GPU's clients (bytes from the interception
// library's accounting files) fit in its memory capacity, the GPU is shared
// and package share splits its time. When they exceed the capacity, clients
// running together would keep evicting each other's managed pages, so the
// GPU switches to exclusive time slices: one active client, the holder, gets
// the GPU for up to Quantum, then the next active client in key order takes
// over (round robin). A holder that goes idle releases the GPU early. When
// the working sets fit again the GPU returns to sharing.
//
// The package is pure: time and working sets come in as arguments. It must
// not read files or grant tokens.
package thrash
