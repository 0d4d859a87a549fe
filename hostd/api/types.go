package api

import (
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/gpuuse"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// State is a job's lifecycle state.
type State string

// Job states. Queued and Running are live; the others are final.
const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Stopped   State = "stopped"
	// Lost means the job's processes vanished and no exit status was recorded.
	Lost State = "lost"
	// Preempted means the job was stopped to make room for another and was
	// not restartable (a restartable one goes back to Queued instead).
	Preempted State = "preempted"
)

// Final reports whether s is a terminal state.
func (s State) Final() bool { return s != Queued && s != Running }

// SubmitRequest asks the daemon to queue a job.
type SubmitRequest struct {
	// GPU is the request in string form (request.Parse fields).
	GPU map[string]string `json:"gpu"`
	// Command is the program (an absolute path) and its arguments.
	Command []string `json:"command"`
	// Env is the job's base environment (KEY=VALUE); the daemon adds
	// CUDA_VISIBLE_DEVICES and the TESSERA_* variables.
	Env []string `json:"env,omitempty"`
	// Dir is the job's working directory (absolute).
	Dir string `json:"dir,omitempty"`
	// Queue names the queue (default "default").
	Queue string `json:"queue,omitempty"`
	// Priority orders jobs within a queue: higher first, in [-1000, 1000].
	Priority int `json:"priority,omitempty"`
	// InterceptLib overrides the daemon's interception library path.
	InterceptLib string `json:"interceptLib,omitempty"`
	// Restartable says the job may be started again from the beginning:
	// when it is preempted it goes back to the queue instead of ending.
	Restartable bool `json:"restartable,omitempty"`
	// RequestID, when set, makes the submission idempotent: a second
	// submission by the same user with the same ID queues nothing and
	// returns the first one's job (a retry after a timeout never runs the
	// job twice). 8 to 64 characters of A-Z, a-z, 0-9, '-' and '_'; the
	// tessera CLI makes a random one per run.
	RequestID string `json:"requestId,omitempty"`
	// NotAfter, when set, is when the client stops waiting for the answer:
	// a submission the daemon reads after it queues nothing (the client
	// has given up and says so; a retry with the same RequestID is how to
	// submit it again).
	NotAfter *time.Time `json:"notAfter,omitempty"`
	// OwnerUID is the uid the job is submitted for. The API server sets it
	// from the connection (the unix socket peer's uid, or the daemon's uid
	// for a caller with the API token); clients cannot send it.
	OwnerUID *uint32 `json:"-"`
}

// Job is a job's record as the daemon keeps and reports it.
type Job struct {
	ID       string      `json:"id"`
	Seq      uint64      `json:"seq"`
	Queue    string      `json:"queue"`
	Priority int         `json:"priority"`
	GPU      request.GPU `json:"gpu"`
	// EngineGPU is a MIG request's equivalent share (compute slices over
	// the GPU's, the profile's memory), counted toward fair-share usage
	// only: the placement engine places the MIG request itself. Nil for
	// other requests.
	EngineGPU *request.GPU `json:"engineGpu,omitempty"`
	Command   []string     `json:"command"`
	Env       []string     `json:"env,omitempty"`
	Dir       string       `json:"dir,omitempty"`
	State     State        `json:"state"`
	Submitted time.Time    `json:"submitted"`
	Started   *time.Time   `json:"started,omitempty"`
	Finished  *time.Time   `json:"finished,omitempty"`
	// Node and GPUs are the placement decision (GPU positions on the node).
	Node   int             `json:"node"`
	GPUs   []int           `json:"gpus,omitempty"`
	Shares []binding.Share `json:"shares,omitempty"`
	// ShmDir is the job's accounting folder (TESSERA_SHM_DIR) when it is
	// not the job folder's shm/: a job run as another user than the
	// daemon's has one outside the state folder.
	ShmDir string `json:"shmDir,omitempty"`
	// InterceptLib is the library preloaded into the job ("" when none).
	InterceptLib string `json:"interceptLib,omitempty"`
	// SupervisorPID and SupervisorStart identify the supervisor process;
	// the start time (clock ticks since boot, /proc/PID/stat field 22)
	// detects pid reuse.
	SupervisorPID   int    `json:"supervisorPid,omitempty"`
	SupervisorStart uint64 `json:"supervisorStart,omitempty"`
	// Runs counts the job's starts (more than one for a restartable job
	// preempted and started again). While the job is Running with no
	// SupervisorPID it is being started: run Runs's claim file in the job
	// folder says whether its supervisor got to it (see supervisor.Claim).
	Runs int `json:"runs,omitempty"`
	// StopRequested is set by `tessera stop`; the final state is then Stopped.
	StopRequested bool `json:"stopRequested,omitempty"`
	// Restartable jobs go back to the queue when preempted (see Preempted).
	Restartable bool `json:"restartable,omitempty"`
	// Preempt is set on a running job chosen as a preemption victim, until
	// it has exited; the job's end (or re-queue) records it in Preemptions.
	Preempt *Preemption `json:"preempt,omitempty"`
	// Preemptions counts how often the job was preempted and re-queued;
	// LastPreemption says the latest one.
	Preemptions    int         `json:"preemptions,omitempty"`
	LastPreemption *Preemption `json:"lastPreemption,omitempty"`
	// Requeued is when a restartable job last went back to the queue after
	// a preemption; its wait (priority aging) counts from then, so it does
	// not jump ahead of the job that preempted it.
	Requeued *time.Time `json:"requeued,omitempty"`
	// ExitCode is the job's exit code (128+signal when killed); nil when unknown.
	ExitCode *int `json:"exitCode,omitempty"`
	// Reason explains the final state ("exit status 2", "killed by signal 15").
	Reason string `json:"reason,omitempty"`
	// OwnerUID is the uid that submitted the job: it alone (besides the
	// daemon's user and root) sees the job's whole environment and its
	// output, and may stop it. Nil on records written before owners were
	// recorded: those belong to the daemon's user.
	OwnerUID *uint32 `json:"ownerUid,omitempty"`
	// RequestID is the submission's RequestID (see SubmitRequest).
	RequestID string `json:"requestId,omitempty"`
	// EnvFiltered says Env was left out of this answer: the API shows a
	// job's environment only when asked (?env=true, tessera ps --show-env),
	// and then only to the job's owner, the daemon's user and root.
	EnvFiltered bool `json:"envFiltered,omitempty"`
	// Filtered says Command holds only the program's file name and Dir is
	// left out: the caller is not the job's owner, the daemon's user or
	// root, and a command line may hold secrets.
	Filtered bool `json:"filtered,omitempty"`
}

// Preemption records why a job was (or is being) stopped for another.
type Preemption struct {
	// By is the waiting job the victim makes room for.
	By string `json:"by"`
	// Kind is "priority" (a higher-priority job of the same queue),
	// "reclaim" (a queue below its guarantee takes it back from one above)
	// or "idle" (the victim held its GPUs idle past its queue's
	// idleReclaimAfter).
	Kind string `json:"kind"`
	// Reason is the sentence tessera ps and tessera queue show.
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// QueueEntry is one waiting job in start order, with why it waits.
type QueueEntry struct {
	Position int    `json:"position"`
	ID       string `json:"id"`
	Queue    string `json:"queue"`
	Priority int    `json:"priority"`
	Request  string `json:"request"`
	Reason   string `json:"reason"`
	// Preemptions counts how often the job was preempted and re-queued.
	Preemptions int `json:"preemptions,omitempty"`
}

// QueueStatus is one queue: its configuration, what its running jobs use
// and its fair-share position.
type QueueStatus struct {
	Name   string `json:"name"`
	Parent string `json:"parent,omitempty"`
	// Configured is false for queues created on first use.
	Configured bool               `json:"configured"`
	Priority   int32              `json:"priority"`
	Weight     int32              `json:"weight"`
	Guaranteed queueing.Resources `json:"guaranteed"`
	Limit      queueing.Resources `json:"limit"`
	// Used is what the queue's running jobs (and its children's) hold.
	Used queueing.Resources `json:"used"`
	// Share is the fair-share position: below 1, the part of its guarantee
	// it uses; above, 1 plus its over-quota dominant share per weight.
	Share   float64 `json:"share"`
	Running int     `json:"running"`
	Waiting int     `json:"waiting"`
	// IdleReclaimAfterSeconds is how long a job of the queue may hold its
	// GPUs idle before any waiting job may stop it (idleReclaimAfter in
	// the configuration); 0: never.
	IdleReclaimAfterSeconds int64 `json:"idleReclaimAfterSeconds,omitempty"`
}

// GPUStatus is one GPU's live booking.
type GPUStatus struct {
	Node          string   `json:"node"`
	Index         int      `json:"index"`
	UUID          string   `json:"uuid"`
	Model         string   `json:"model"`
	MemoryMiB     int64    `json:"memoryMiB"`
	FreeMemoryMiB int64    `json:"freeMemoryMiB"`
	FreeFraction  float64  `json:"freeFraction"`
	Jobs          []string `json:"jobs,omitempty"`
	// MIG are the GPU's MIG instances when it is in MIG mode: on a GPU
	// whose layout the daemon manages through the driver (tessera up
	// --mig-managed), as the driver lists them after the last creation or
	// destruction; otherwise as the daemon books them (the configured
	// instances and, on a simulated host, those created for jobs).
	MIG []MIGInstanceStatus `json:"mig,omitempty"`
	// Shares are the running jobs' shares of the GPU, each booked beside
	// its use, and Use their sums (measured, simulated, or not metered
	// and why); both only in answers that read use (GET /v1/status).
	Shares []gpuuse.Share `json:"shares,omitempty"`
	Use    *gpuuse.Use    `json:"use,omitempty"`
}

// UseRule is how the daemon measures use: over windows of WindowSeconds,
// and a job is an idle holder once its use stays below IdleBelowMilli
// thousandths of the GPU for IdleAfterSeconds (tessera up --idle-below,
// --idle-after).
type UseRule struct {
	WindowSeconds    float64 `json:"windowSeconds"`
	IdleBelowMilli   int64   `json:"idleBelowMilli"`
	IdleAfterSeconds float64 `json:"idleAfterSeconds"`
}

// MIGInstanceStatus is one MIG instance of a GPU in MIG mode.
type MIGInstanceStatus struct {
	Profile string `json:"profile"`
	// Start is its first memory slice, -1 when unknown.
	Start int `json:"start"`
	// UUID is the MIG device UUID, "" when not known yet.
	UUID      string `json:"uuid,omitempty"`
	MemoryMiB int64  `json:"memoryMiB,omitempty"`
	// InUse marks an instance a job holds (or, on a managed GPU, one
	// created for a job that is not destroyed yet).
	InUse bool `json:"inUse,omitempty"`
	// Job is the job holding it, when known.
	Job string `json:"job,omitempty"`
}

// Status is the daemon's summary.
type Status struct {
	Source    string `json:"source"`
	Simulated bool   `json:"simulated"`
	// Sharing is how jobs share a GPU: "shared" (launch tokens) or "mps"
	// (NVIDIA MPS; one GPU per job).
	Sharing  string      `json:"sharing,omitempty"`
	StateDir string      `json:"stateDir"`
	GPUs     []GPUStatus `json:"gpus"`
	// Use is how use is measured; nil without a node arbiter.
	Use     *UseRule `json:"use,omitempty"`
	Queued  int      `json:"queued"`
	Running int      `json:"running"`
}

// TokenFile is the file in the state folder that holds the API token
// (mode 0600): `tessera up --http` creates it, and a client talking to the
// daemon over TCP sends it as "Authorization: Bearer TOKEN".
const TokenFile = "api-token"

// TokenEnv is the environment variable a client takes the API token from
// before TokenFile.
const TokenEnv = "TESSERA_TOKEN"

// WaitHeartbeat is how often the daemon sends a space (which JSON
// ignores) while GET /v1/jobs/{id}/wait waits for the job to end, so a
// client tells a long job from a daemon that stopped answering.
const WaitHeartbeat = 5 * time.Second

// LogCompleteTrailer is the HTTP trailer a log stream ends with when it
// ended by design (not followed, or the job ended and all output was sent).
// A stream without it was cut (the daemon restarted): resume at the offset
// reached.
const LogCompleteTrailer = "Tessera-Log-Complete"

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
	// Field is the request field at fault (request.FieldCompute...), or
	// a SubmitRequest field ("command", "queue", "priority").
	Field string `json:"field,omitempty"`
}
