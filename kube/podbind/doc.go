// Package podbind writes a scheduling decision to the API server: the
// Binding that sets a pod's node with its assignment annotation in one
// call, a pool of workers that runs bindings off the scheduling loop, and
// reading back a pod whose binding failed to learn whether it was bound
// after all (Settle).
//
// It decides nothing (the scheduler chose the node and the shares, and
// books the outcome) and keeps no state beyond the pool's workers.
package podbind
