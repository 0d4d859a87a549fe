package dispatch

import (
	"errors"
	"fmt"
	"time"

	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// Config sets the core's rules between cycles.
type Config struct {
	// InitialBackoff and MaxBackoff bound how long a workload or gang that
	// failed waits before it is tried again: the wait doubles with each
	// failure in a row (0: tried again every cycle).
	InitialBackoff, MaxBackoff time.Duration
	// ReservationWait is how long a workload or gang may fail to fit before
	// it reserves nodes that others may only backfill (0: no reservations).
	// One reservation is in force at a time.
	ReservationWait time.Duration
	// PreemptorWait bounds how long a workload that named victims waits for
	// them to stop before it may name others. The room they free is held
	// for it (its nomination: workloads of its priority or lower may not
	// take it) until it is placed, or tried once this wait is over.
	PreemptorWait time.Duration
	// AgingStep raises a waiting workload's priority by one for every step
	// it has waited, so a low priority cannot starve behind a stream of
	// newer high ones (0: no aging).
	AgingStep time.Duration
	// Strict serves the waiting workloads in one order across queues (fair
	// share between queues, the queue's order within) and stops at the
	// first that waits: no workload overtakes one that waits.
	Strict bool
	// Preemption lets a workload that fits nowhere name victims, with
	// MinRuntime protecting the young.
	Preemption bool
	MinRuntime time.Duration
	// Noun is what the front door calls one workload in messages ("pod",
	// "job"; default "workload").
	Noun string
}

// Item is a waiting workload as its front door describes it when it
// arrives or changes.
type Item struct {
	// ID names it uniquely (a pod's namespace/name, a job ID).
	ID string
	// Instance tells it from an earlier workload of the same ID (a pod
	// deleted and made again): another instance starts afresh.
	Instance string
	// Queue is its queue ("" the default), Priority its priority in it.
	Queue    string
	Priority int32
	// Gang is its gang's key ("" when it is placed alone).
	Gang string
	// Arrived orders workloads of equal priority (earlier first), then Seq,
	// then ID.
	Arrived time.Time
	Seq     uint64
	// Since is when it began to wait this time, for aging (zero: Arrived).
	Since time.Time
}

// GangSpec is a gang's definition as its front door reads it.
type GangSpec struct {
	// Min is how many members must run before any may start.
	Min int
	// Timeout, when set, is how long the gang may fail to fit before its
	// members' messages say it timed out.
	Timeout time.Duration
	// Err says why its definition cannot be used: every member is refused.
	Err error
}

// Unready is a translation error saying a workload cannot be tried yet
// for a reason of its own (a claim not made yet): it waits, is backed off
// and is not counted invalid.
type Unready struct{ Reason string }

func (u Unready) Error() string { return u.Reason }

// Frame is the world a cycle decides on, as the front door holds it now.
type Frame struct {
	// Cluster is the free capacity with running and assumed work booked;
	// the cycle books what it places onto it. Nil: the core's own books
	// (Books), with their usage, capacity and running workloads (Usage,
	// Capacity and Running then come from them unless given), and what
	// the cycle binds is assumed there until the front door books it.
	Cluster *placement.Cluster
	// Policy places workloads that name none.
	Policy placement.Policy
	// Queues is the queue tree (nil: the default queue only); Usage what
	// running work takes from each queue; Capacity the total for shares
	// (zero: summed from Cluster).
	Queues   *queueing.Tree
	Usage    map[string]queueing.Resources
	Capacity queueing.Resources
	// Running are the workloads booked on Cluster: preemption candidates,
	// and the gangs' running members.
	Running []cycle.Running
	// IdleSince, when set, says since when a running workload has been an
	// idle holder (zero: it is not one), for the queues that reclaim idle
	// holders; the cycle applies it to a copy of Running, so marks are
	// never kept in the books. Nil: no running workload is idle. A front
	// door sets it only when some queue reclaims idle holders.
	IdleSince func(id string) time.Time
	// Translate works a waiting workload out for this cycle: its parts,
	// constraints and Reserver. An Unready error makes it wait; any other
	// error refuses it. A translation with AwaitingVictims set names no
	// victims this cycle (the front door knows it cannot, or must not; the
	// core sets it too while the workload waits for victims it named).
	Translate func(id string) (cycle.Workload, error)
	// Gang reads a gang's definition (nil: every gang is refused).
	Gang func(key string) GangSpec
	// Skip, when set, names the waiting workloads the front door knows
	// would fail now as they last did (nothing they could use changed
	// since: a simulator that tracks which nodes gained room, as
	// kube-scheduler's queueing hints): the cycle leaves them out as it
	// leaves out a backoff, untranslated and with no failure counted, and
	// counts them in Ready.Skipped. A gang is left out when Skip names
	// every waiting member; in a strict cycle one left out holds up the
	// rest.
	Skip func(id string) bool
	// Arrival says what a workload that arrived since the last cycle
	// teaches the policies that learn (placement.Observer): its parts, as
	// the cycle will ask to place them, and its own policy when it names
	// another (told too); ok false: nothing (an invalid workload is no
	// arrival). Nil: no policy learns from arrivals (arrivals.go).
	Arrival func(id string) (own placement.Policy, parts []placement.Pod, ok bool)
}

// Cause says, for a workload that waits, what stopped it before or
// outside the engine's own statuses.
type Cause int

const (
	// CauseCycle: the cycle's status says it all.
	CauseCycle Cause = iota
	// CauseUnknownQueue: its queue does not exist.
	CauseUnknownQueue
	// CauseUnready: its translation said it must wait (Unready).
	CauseUnready
	// CauseRefused: its translation, or its gang's definition, failed.
	CauseRefused
)

// Bind says: bind workload ID at Decisions (nodes indexed in the frame's
// cluster). Members of one gang come together, in order.
type Bind struct {
	ID        string
	Gang      string
	Decisions []placement.Decision
	// Workload is its translation, as placed (its parts and Reserver).
	Workload cycle.Workload
	// Order counts the core's binds, this one included: with the cycle's
	// time, when it started as preemption orders victims
	// (cycle.Running.Started and Order), the same in every front door.
	Order uint64
}

// Eviction says: stop Victims so that For fits (on node Node, for a gang
// its first).
type Eviction struct {
	For     string
	Node    int
	Victims []cycle.Victim
}

// Wait says why workload ID was not placed this cycle.
type Wait struct {
	ID     string
	Status cycle.Status
	Cause  Cause
	// Message is the engine's words; Err the translation's or Reserver's
	// error when one refused it.
	Message string
	Err     error
	// Outcome is the cycle's outcome (its rejections), when it was tried.
	Outcome cycle.Outcome
	// AwaitingVictims: it waits for victims it named earlier to stop.
	AwaitingVictims bool
	// Retry is when it is tried again at the latest (zero: at the next
	// cycle, or, for a gang waiting for members, when one arrives).
	Retry time.Time
}

// Ready is what a cycle decided, for the front door to carry out.
type Ready struct {
	Binds     []Bind
	Evictions []Eviction
	Waits     []Wait
	// BackingOff counts the workloads left out, waiting out a backoff;
	// Skipped those Frame.Skip left out.
	BackingOff, Skipped int
	// Order are the waiting workloads' IDs in the order the cycle took
	// them within their queues (a gang's members at its first one's
	// place), those backing off included.
	Order []string
	// Tried counts the workloads and gangs the cycle served.
	Tried int
	// Next is when the first backoff ends (zero: none waits).
	Next time.Time
}

// state is what the core keeps of one workload.
type state struct {
	Item
	// binding: a Bind was issued and not yet acknowledged (assumed).
	binding bool
	// preemptUntil: it named victims and waits for them until then.
	preemptUntil time.Time
}

// Core is the scheduling core. It is not safe for concurrent use: a front
// door calls it from one goroutine (events its informers or workers report
// are queued and stepped in by that goroutine).
type Core struct {
	cfg     Config
	items   map[string]*state
	backoff *backoff
	// blocked are the keys (workload or gang) that failed to fit, since when.
	blocked map[string]time.Time
	res     *reservation
	// gangs counts each gang's workloads in items.
	gangs map[string]int
	// noms are the rooms held for the keys that named victims (nominate.go).
	noms map[string]*nomination
	// books is the cluster as booked (Books).
	books *booked.Cluster
	// binds counts the binds issued (Bind.Order).
	binds uint64
	// arrived are the workloads added since the last cycle, whose
	// arrival the policies are told of (arrivals.go).
	arrived []string
}

// New returns an empty core.
func New(cfg Config) (*Core, error) {
	if cfg.InitialBackoff < 0 || cfg.MaxBackoff < 0 || cfg.ReservationWait < 0 || cfg.PreemptorWait < 0 || cfg.AgingStep < 0 || cfg.MinRuntime < 0 {
		return nil, errors.New("dispatch: durations must be >= 0")
	}
	if cfg.MaxBackoff < cfg.InitialBackoff {
		return nil, fmt.Errorf("dispatch: the maximum backoff (%v) must be at least the initial one (%v)", cfg.MaxBackoff, cfg.InitialBackoff)
	}
	return &Core{cfg: cfg, items: map[string]*state{}, backoff: newBackoff(cfg.InitialBackoff, cfg.MaxBackoff), blocked: map[string]time.Time{}, gangs: map[string]int{}, noms: map[string]*nomination{},
		books: booked.New()}, nil
}

// Books is the cluster as booked, which the front door steps with what
// its world shows (nodes, the holds of bound workloads) and a frame with
// no Cluster of its own cycles on.
func (c *Core) Books() *booked.Cluster { return c.books }

// ResetBooks starts the books anew (empty), after a cycle failed part way
// (a decision that did not apply): the front door books its world again.
func (c *Core) ResetBooks() *booked.Cluster {
	c.books = booked.New()
	return c.books
}

// key is the backoff and reservation key of an item: its gang's, or its own.
func (it *Item) key() string {
	if it.Gang != "" {
		return "gang/" + it.Gang
	}
	return "one/" + it.ID
}

// Add records a waiting workload (or replaces its description). A new
// member of a gang ends the gang's wait: it may now be complete.
func (c *Core) Add(it Item) {
	if old, ok := c.items[it.ID]; ok {
		if old.Instance == it.Instance {
			if old.Item != it {
				c.Update(it, false)
			}
			return
		}
		c.forget(it.ID)
	}
	c.items[it.ID] = &state{Item: it}
	c.arrived = append(c.arrived, it.ID)
	if it.Gang != "" {
		c.gangs[it.Gang]++
		c.backoff.endWait(it.key())
	}
}

// Update replaces a waiting workload's description; respecified says the
// workload itself changed (its request, not only how it is described), so
// its backoff starts over.
func (c *Core) Update(it Item, respecified bool) {
	s, ok := c.items[it.ID]
	if !ok {
		c.Add(it)
		return
	}
	if respecified {
		c.backoff.forget(s.key(), it.key())
		delete(c.noms, s.key()) // its plan was for the old request
	}
	if s.key() != it.key() {
		delete(c.noms, s.key())
		c.unblock(s.key())
		if s.Gang != "" {
			if c.gangs[s.Gang]--; c.gangs[s.Gang] <= 0 {
				delete(c.gangs, s.Gang)
			}
		}
		if it.Gang != "" {
			c.gangs[it.Gang]++
			c.backoff.endWait(it.key())
		}
	}
	s.Item = it
}

// Remove forgets a workload: it is gone, or bound and seen so.
func (c *Core) Remove(id string) { c.forget(id) }

// Bound acknowledges a Bind: the workload is placed; it leaves the core.
func (c *Core) Bound(id string) { c.forget(id) }

// forget drops a workload, and its key's backoff, wait and reservation
// once no workload of the key waits.
func (c *Core) forget(id string) {
	s, ok := c.items[id]
	if !ok {
		return
	}
	delete(c.items, id)
	delete(c.noms, s.key()) // a gang's plan counted on every member
	if c.res != nil {
		c.res.drop(id)
		if len(c.res.forIDs) == 0 {
			c.unblock(c.res.key)
		}
	}
	k := s.key()
	if s.Gang != "" {
		if c.gangs[s.Gang]--; c.gangs[s.Gang] > 0 {
			return // the gang's other members still wait
		}
		delete(c.gangs, s.Gang)
	}
	c.backoff.forget(k)
	c.unblock(k)
}

// BindFailed acknowledges a Bind that could not be carried out: the
// workload waits again, backed off (cluster changes do not end this
// wait), and is retried at the returned time.
func (c *Core) BindFailed(id string, now time.Time) time.Time {
	s, ok := c.items[id]
	if !ok {
		return time.Time{}
	}
	s.binding = false
	c.books.Release(id) // not bound: what it was booked no longer holds
	return now.Add(c.backoff.failed(s.key(), failedWithError, now))
}

// Respecified says the workload id itself changed (its request): its
// backoff starts over.
func (c *Core) Respecified(id string) {
	if s, ok := c.items[id]; ok {
		c.backoff.forget(s.key())
		delete(c.noms, s.key())
	}
}

// Retain forgets every workload live does not name (gone, or no longer
// waiting for this front door): for a front door that lists what waits.
func (c *Core) Retain(live map[string]bool) {
	for id := range c.items {
		if !live[id] {
			c.forget(id)
		}
	}
}

// ClusterChanged says room may have been made (a workload ended, a node
// came or changed): the workloads that failed to fit are tried again.
func (c *Core) ClusterChanged() { c.backoff.clusterChanged() }

// Len is the number of workloads waiting or binding.
func (c *Core) Len() int { return len(c.items) }

// Waiting reports whether id is known and not binding.
func (c *Core) Waiting(id string) bool {
	s, ok := c.items[id]
	return ok && !s.binding
}

// Binding reports whether a Bind of id is in flight (assumed).
func (c *Core) Binding(id string) bool {
	s, ok := c.items[id]
	return ok && s.binding
}

// BackingOff reports whether id waits out a backoff at now.
func (c *Core) BackingOff(id string, now time.Time) bool {
	s, ok := c.items[id]
	return ok && c.backoff.waiting(s.key(), now)
}

// Reservation says which workloads the reservation in force holds room
// for and what it is called ("" when none).
func (c *Core) Reservation() (what string, nodes []string) {
	if c.res == nil {
		return "", nil
	}
	return c.res.what, c.res.nodeNames()
}

// Config is the configuration the core runs with, defaults applied.
func (c *Core) Config() Config { return c.cfg }
