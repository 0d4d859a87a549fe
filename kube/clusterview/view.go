package clusterview

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/inventory"
	"github.com/tessera-gpu/tessera/kube/nodeuse"
	"github.com/tessera-gpu/tessera/queueing"
	"github.com/tessera-gpu/tessera/request"
)

// The types the Kubernetes scheduler publishes at the end of each cycle
// (Board builds them from the Cycle it publishes). They live here, with their one
// reader, so that the scheduler imports the view and not the other way
// round.

// View is what one scheduling cycle decided from, after its decisions:
// the nodes and their GPUs as the scheduler read them, what it has booked
// on each (bound and assumed pods, those it just placed included), the
// queues with their fair-share position and the pods still waiting, in
// queue order, with the reason the scheduler gave them.
type View struct {
	// Time is when the cycle started.
	Time time.Time
	// Scheduler is the schedulerName served, Policy the placement policy.
	Scheduler, Policy string
	// Nodes in name order; nodes whose inventory could not be read are
	// left out, as the cycle leaves them out.
	Nodes []NodeView
	// Queues in the tree's order.
	Queues []QueueView
	// Pending are the pods waiting for this scheduler, in queue order.
	Pending []PodView
	// FragmentationMilli is the cluster's expected fragmentation, the
	// simulator's measure (placement.ClusterFragmentation, in GPU milli):
	// the free GPU compute the typical pods could not use, against the
	// Typical pod shapes the policy places for (0 shapes: the policy keeps
	// none yet, or uses none, and FragmentationMilli is 0).
	FragmentationMilli float64
	Typical            int
	// Use is each node's GPUUse status as its agent last published it, by
	// node name (ReadUse; a node without one publishes no use), UseErrors
	// what could not be read. The scheduler reads them when the view is
	// read, not at the cycle: they are the agents' latest.
	Use       map[string]nodeuse.Status
	UseErrors []string
}

// NodeView is one node as the cycle saw it.
type NodeView struct {
	Name string
	// Source is where its GPUs were read from: "node-labels", or the
	// GPUNode's status.source (the agent's discovery).
	Source string
	// Ready is the node's Ready condition; Unschedulable its
	// spec.unschedulable (cordoned).
	Ready, Unschedulable bool
	// CPUMilli and MemoryMiB are allocatable; the Free ones what the
	// bookings leave.
	CPUMilli, FreeCPUMilli, MemoryMiB, FreeMemoryMiB int64
	GPUs                                             []GPUView
	// Pods are the pods booked on it (bound, or assumed by this scheduler).
	Pods []PodView
}

// GPUView is one GPU: as its node reports it, and as placement books it.
type GPUView struct {
	inventory.GPU
	// Schedulable is false for a GPU placement does not offer (unhealthy).
	Schedulable bool
	// FreeMilli and FreeMemoryMiB are placement's books after the cycle:
	// what a new pod could still get (0 when not schedulable).
	FreeMilli, FreeMemoryMiB int64
}

// PodView is one pod the scheduler counts.
type PodView struct {
	Namespace, Name string
	UID             types.UID
	Queue           string
	Priority        int32
	// Gang is the pod's gang ("" for none).
	Gang string
	// Node is where it is bound or assumed ("" while pending).
	Node    string
	Phase   corev1.PodPhase
	Created time.Time
	// Started is status.startTime (zero while not started).
	Started time.Time
	// Deleting is set once the pod is being deleted (it still counts).
	Deleting bool
	// Requests are its GPU requests, one per container asking for GPUs;
	// RequestError says why they could not be read.
	Requests     []request.GPU
	RequestError string
	// Assignment is its GPU assignment (nil: none; CPU-only pods and
	// pending ones).
	Assignment *binding.Assignment
	// CPUMilli and MemoryMiB are its host requests.
	CPUMilli, MemoryMiB int64
	// Reason and Message are its PodScheduled=False condition, as the
	// scheduler wrote it ("" when it has none yet).
	Reason, Message string
	// BackingOff: left out of the cycle, waiting out a retry backoff.
	BackingOff bool
}

// QueueView is one queue after the cycle.
type QueueView struct {
	queueing.Queue
	// Configured is false for the default queue as the tree adds it when
	// no Queue object defines it.
	Configured bool
	// Used is what its pods (with its children's) have booked; Share its
	// fair-share position (queueing.Ledger.Share).
	Used  queueing.Resources
	Share float64
	// Running counts its booked pods, Waiting its pending pods (a gang's
	// in its first member's queue).
	Running, Waiting int
}
