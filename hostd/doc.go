// Package hostd is Tessera's single-host daemon (`tessera up`): it keeps a
// persistent job queue, places queued jobs on the host's GPUs with the
// placement engine, starts each job through a supervisor process that
// survives daemon restarts, and re-adopts running jobs after a restart.
//
// Layering: hostd/queue orders waiting jobs (a pure seam the cluster's
// fair-share rules can replace), hostd/store persists records in bbolt,
// hostd/supervisor runs one job and records its exit status, hostd/jobenv
// builds a job's environment, hostd/server and hostd/client speak the local
// HTTP+JSON API over a unix socket, and this package ties them together.
// The node arbiter plugs in through Config.Arbiter (ArbiterSeat adapts package arbiter).
package hostd
