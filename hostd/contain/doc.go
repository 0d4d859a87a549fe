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
// The package owns finding, killing and waiting for a job's processes.
// It does not decide when a job ends or what its share is: the daemon
// (package hostd) and the supervisor (package hostd/supervisor) call it.
package contain
