// Package shareenv owns the environment contract between the node that
// hands out a GPU share (the host daemon for a job, the node agent for a
// container) and the workload that runs with it: the names of the TESSERA_*
// variables, their formats, and building them from the shares (package
// binding). The interception library (intercept/src/config.c) reads some of
// them; a test keeps the names it reads and the ones here equal.
//
// It must not do I/O, know how jobs or containers are started, or decide
// anything: it only spells out what was decided.
package shareenv
