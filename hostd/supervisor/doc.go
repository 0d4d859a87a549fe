// Package supervisor runs one job on behalf of the host daemon. The daemon
// starts a supervisor (`tessera supervise JOBDIR`, a hidden command) in a
// session of its own; the supervisor reads JOBDIR/spec.json, starts the job
// in its own process group with its output going to JOBDIR/stdout.log and
// JOBDIR/stderr.log, forwards SIGTERM and SIGINT to the job's group, waits
// for it and writes JOBDIR/exit.json atomically. Neither process depends on
// the daemon, so a job survives a daemon restart and its exit status is
// recorded even when no daemon is running.
package supervisor
