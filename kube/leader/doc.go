// Package leader runs work only while this replica holds a Lease
// (client-go's leader election), so several replicas run with one
// active; losing the lease ends the work with an error, for the process
// to restart as a follower.
//
// It elects only; it must not know what the work is.
package leader
