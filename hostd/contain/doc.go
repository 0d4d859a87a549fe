// Package contain keeps every process of one job findable, so that the
// job can be ended as a whole and its GPU share freed only once nothing
// of it runs any more.
//
// Two mechanisms work together. Where a cgroup v2 hierarchy is writable
// (root, or a delegated subtree), each job run gets a cgroup of its own
// and its first process is created inside it (clone3 CLONE_INTO_CGROUP);
// nothing the job forks can leave it short of writing to another
// cgroup's cgroup.procs, and cgroup.kill ends it atomically. Everywhere,
// each job run also carries a random mark in its environment
// (TESSERA_JOB_MARK), inherited through fork, exec and setsid; a scan of
// /proc finds processes by it where no cgroup exists or a process left
// its cgroup.
//
// A job can leave its cgroup only by writing its pid into another
// cgroup's cgroup.procs, which needs write access there: a job running as
// a user other than the daemon's (a root daemon runs another user's job
// as that user) cannot, as every folder and file of the hierarchy the
// daemon and supervisor create is theirs (mode 0755 folders, 0644
// files, nothing delegated). A job running as root, or as the user of a
// daemon in a delegated subtree, can: the cgroup contains it only as
// long as it does not try.
//
// The package owns finding, killing and waiting for a job's processes,
// and the daemon's cgroup folder: Host.Release removes it when the daemon
// ends with no job in it, Host.SweepStale removes empty ones earlier
// daemons left. It does not decide when a job ends or what its share is:
// the daemon (package hostd) and the supervisor (package
// hostd/supervisor) call it.
package contain
