// Package supervisor runs one job on behalf of the host daemon. The daemon
// starts a supervisor (`tessera supervise JOBDIR`, a hidden command) in a
// session of its own; the supervisor reads JOBDIR/spec.json, starts the job
// in its own process group with its output going to JOBDIR/stdout.log and
// JOBDIR/stderr.log, forwards SIGTERM and SIGINT to the job's group, waits
// for it and writes JOBDIR/exit.json atomically. A supervisor running as
// root starts the job as the spec's User (uid, primary gid, supplementary
// groups, HOME) after opening its log files, so that user needs no access
// to the state folder; LookupUID and LookupUser resolve such users. Neither process depends on
// the daemon, so a job survives a daemon restart and its exit status is
// recorded even when no daemon is running.
//
// The supervisor refuses a job folder another user could change
// (CheckJobDir), and every file in a job folder (spec, exit status, logs,
// claims) is opened without following links, by the daemon and the
// supervisor alike (internal/safefs). Room for the exit status is set
// aside before the job starts, so a job that fills the disk still gets one
// recorded, saying so; WhyNoExit tells the daemon why a job has none.
package supervisor
