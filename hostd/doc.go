// Package hostd is Tessera's single-host daemon (`tessera up`): it keeps a
// persistent job queue, places queued jobs on the host's GPUs with the
// placement engine, starts each job through a supervisor process that
// survives daemon restarts, and re-adopts running jobs after a restart.
//
// Layering: the scheduling core (package dispatch) holds the queued jobs,
// fed by this package's events (a submission, a stop, a start, a
// re-queueing), orders them and runs each cycle on its books, which this
// package steps as jobs start and end (bookings.go); this package carries
// out what it decides (schedule.go) and words why a job waits (query.go),
// but decides no order or placement itself. hostd/store persists records in bbolt,
// hostd/supervisor runs one job and records its exit status, hostd/jobenv
// builds a job's environment, hostd/server and hostd/client speak the local
// HTTP+JSON API over a unix socket (and loopback TCP with a token), and
// this package ties them together.
// What each running job holds beside what it uses (StatusUse, use.go) is
// read from the arbiter's use windows as package gpuuse records; on
// simulated GPUs SimMeter is the arbiter's meter, from each job's
// declared load (TESSERA_SIM_LOAD).
// The node arbiter plugs in through Config.Arbiter (ArbiterSeat adapts package arbiter);
// with Config.Sharing arbiter.ModeMPS it runs NVIDIA MPS, each job gets its
// MPS client variables (Arbiter.ClientEnv) and takes one GPU. On GPUs whose
// MIG layout the operator hands to the daemon, Config.MIG (migctl.Manager)
// creates a --mig job's instance before it starts and destroys it after
// it ends (mig.go).
//
// Queues, fair share and preemption follow the cluster's rules through the
// same pure packages: queueing (queues from the --config file, see
// ConfigFile; fair-share order through dispatch) and preemption (which
// running jobs a waiting one may stop: a lower priority in its queue,
// reclaim by a queue below its guarantee, or a job idle on all its GPUs
// past its queue's idleReclaimAfter, from the arbiter's marks: idle.go).
// This package only applies the decisions: it marks victims, stops them
// through their supervisors and re-queues restartable ones.
//
// Each running job's supervisor is tended (tend.go): a stop it has not
// carried out by the stop grace is carried out by the daemon, which kills
// the job's processes and the supervisor and records why; a supervisor
// stopped by a signal after its job ended is continued so it records the
// exit. A daemon running as root runs each job as its submitter, or as
// Config.JobUser for root's and token holders' jobs.
//
// Submissions are checked against this host's GPUs and refused in the
// host's words (hostwords.go): the `tessera run` flag, the value and what
// this host allows; where the placement engine decides whether a request
// can ever fit the idle host, its structured rejection is translated.
package hostd
