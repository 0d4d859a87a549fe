package tracesim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-gpu/tessera/cycle"
	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/preemption"
	"github.com/tessera-gpu/tessera/queueing"
)

// dynPod is one arrival of a dynamic replay and what became of it.
type dynPod struct {
	TimedPod
	arrive float64 // compressed arrival time
	queue  int     // index into dynReplay.queues
	prio   int32
	// parts are what the cycle places: the pod, or its gang's one-GPU
	// members (one workload each); ids are their workload IDs.
	parts []placement.Pod
	ids   []string
	gang  string
	need  queueing.Resources // what the parts take from the queue
	gpu   int64              // GPU milli of all parts

	tried     bool         // served by a cycle since it last began to wait
	status    cycle.Status // the last cycle's status
	skip      bool         // the next cycle leaves it out (markSkips)
	running   bool
	started   bool                 // its current (or last) run began and was not stopped
	remade    bool                 // stopped once: it waits again as a pod made anew
	since     float64              // when it last began to wait
	waited    float64              // the time it has waited, before since
	start     float64              // its current (or last) run's start
	ends      float64              // and end
	decisions []placement.Decision // its parts' placements while it runs
	orders    []uint64             // and the core's orders of their binds (Bind.Order)
	use       queueing.Resources   // what it takes from its queue while it runs (cycle.Granted)

	held, memHeld float64 // MIG: the compute and memory its booking holds
}

// dynQueue is one queue's name, rules and running totals.
type dynQueue struct {
	name        string
	guaranteed  int64 // GPU milli
	preemptible bool
	used        queueing.Resources
	alloc       int64 // GPU milli of its running pods
	integral    float64
	waiting     int
	preempted   int
	reclaimed   int
	lost        float64 // GPU milli x seconds
}

// dynReplay is one dynamic replay's state.
type dynReplay struct {
	cfg      DynamicConfig
	c        *placement.Cluster
	pol      placement.Policy
	observer placement.Observer
	capacity int64
	tree     *queueing.Tree // nil: the default queue only
	queues   []dynQueue
	pods     []dynPod
	window   float64

	running []int // running pods by end time (a sorted insert is enough here)
	// waiting are the waiting pods (for MIG in arrival order; otherwise
	// the core orders them and this only counts them).
	waiting []int
	dirty   map[int]bool
	alloc   int64
	now     float64

	// core is the scheduling core the cycles run on (nil for MIG).
	core *dispatch.Core
	// pre are the cycle's preemption candidates (nil: none); held the
	// nodes whose room the core held for preemptors in the last cycle
	// (they gain room for the others when the hold ends); stopped says
	// the last cycle stopped victims (a cycle is due one period later,
	// to place the pods that named them); nodeAt indexes nodes by name.
	pre     *candidates
	held    []int
	stopped bool
	nodeAt  map[string]int

	mig *dynMIG // set for the MIG variant (dynamic_mig.go)
	// rec is the result the placements are recorded in (Record).
	rec *DynamicResult
}

func newDynReplay(cfg DynamicConfig, c *placement.Cluster, pol placement.Policy, mig *dynMIG, arrivals []TimedPod, k float64) (*dynReplay, error) {
	d := &dynReplay{cfg: cfg, c: c, pol: pol, capacity: c.TotalGPUMilli(), dirty: map[int]bool{}, mig: mig}
	d.observer, _ = pol.(placement.Observer)
	if qc := cfg.Queues; qc != nil {
		tree, err := qc.Tree(d.capacity)
		if err != nil {
			return nil, err
		}
		d.tree = tree
		for _, s := range qc.Queues {
			q, _ := tree.Queue(s.Name)
			d.queues = append(d.queues, dynQueue{name: s.Name, guaranteed: q.Guaranteed.GPUMilli, preemptible: s.Preemptible})
		}
	} else {
		d.queues = []dynQueue{{name: queueing.DefaultQueue, preemptible: true}}
	}
	first := arrivals[0].Arrive
	d.pods = make([]dynPod, len(arrivals))
	for i, tp := range arrivals {
		p := &d.pods[i]
		p.TimedPod = tp
		p.arrive = float64(tp.Arrive-first) / k
		if cfg.Queues != nil {
			q, prio, ok := cfg.Queues.queueOf(tp.QoS)
			if !ok {
				return nil, fmt.Errorf("pod %s: no queue takes qos %q (name it in a queue's qos list, or give one queue \"*\")", tp.Pod.Name, tp.QoS)
			}
			p.queue, p.prio = q, prio
		}
		switch {
		case mig != nil:
			q, err := mig.v.Pod(mig.pl.setup, tp.Pod)
			if err != nil {
				return nil, err
			}
			p.parts = []placement.Pod{q}
			p.ids = []string{strconv.Itoa(i)}
		case (cfg.Gangs || tp.Gang) && tp.Pod.GPU.Count > 1:
			p.parts = gangMembers(tp.Pod)
			p.gang = "gang-" + strconv.Itoa(i)
			for m := range p.parts {
				p.ids = append(p.ids, strconv.Itoa(i)+"/"+strconv.Itoa(m))
			}
		default:
			p.parts = []placement.Pod{tp.Pod}
			p.ids = []string{strconv.Itoa(i)}
		}
		p.need = cycle.Resources(p.parts)
		p.gpu = p.need.GPUMilli
	}
	d.window = d.pods[len(d.pods)-1].arrive
	if mig == nil {
		for i := range d.pods {
			if len(d.pods[i].parts) > 1<<memberBits {
				return nil, fmt.Errorf("pod %s: %d gang members, more than %d", d.pods[i].Pod.Name, len(d.pods[i].parts), 1<<memberBits)
			}
		}
		core, err := dispatch.New(dispatch.Config{Preemption: cfg.Preemption, MinRuntime: time.Duration(cfg.MinRuntime * float64(time.Second)),
			ReservationWait: time.Duration(cfg.ReservationWait * float64(time.Second)), Noun: "pod"})
		if err != nil {
			return nil, err
		}
		d.core = core
	}
	return d, nil
}

// gangMembers splits a multi-GPU pod into one-GPU members, its CPU and
// memory shared evenly (the first members take the remainder).
func gangMembers(p placement.Pod) []placement.Pod {
	n := int64(p.GPU.Count)
	out := make([]placement.Pod, n)
	for m := range out {
		q := p
		q.Name = p.Name + "/" + strconv.Itoa(m)
		q.GPU.Count = 1
		q.CPUMilli = p.CPUMilli / n
		if int64(m) < p.CPUMilli%n {
			q.CPUMilli++
		}
		q.MemoryMiB = p.MemoryMiB / n
		if int64(m) < p.MemoryMiB%n {
			q.MemoryMiB++
		}
		out[m] = q
	}
	return out
}

// simEpoch is simulated time 0 for the cycle's clock.
var simEpoch = time.Unix(0, 0).UTC()

func simTime(s float64) time.Time { return simEpoch.Add(time.Duration(s * float64(time.Second))) }

func (d *dynReplay) replay(ctx context.Context, res *DynamicResult) error {
	d.rec = res
	var (
		next     int
		integral float64
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Departures up to now.
		for len(d.running) > 0 && d.pods[d.running[0]].ends <= d.now {
			i := d.running[0]
			d.running = d.running[1:]
			if err := d.release(i); err != nil {
				return err
			}
		}
		// Arrivals up to now.
		for next < len(d.pods) && d.pods[next].arrive <= d.now {
			d.pods[next].since = d.pods[next].arrive
			d.waiting = append(d.waiting, next)
			if d.core != nil {
				d.enqueue(next) // its arrival teaches the policy at the next cycle
			} else {
				d.observe(next)
			}
			next++
		}
		cyc := d.cycle
		if d.mig != nil {
			cyc = d.cycleMIG
		}
		if err := cyc(res); err != nil {
			return err
		}
		s := Sample{Time: d.now, AllocatedPct: 100 * float64(d.alloc) / float64(d.capacity), Waiting: len(d.waiting)}
		if d.mig != nil {
			s.AllocatedPct = 100 * d.mig.held / float64(d.capacity)
		}
		if d.cfg.Queues != nil {
			for q := range d.queues {
				d.queues[q].waiting = 0
			}
			for _, i := range d.waiting {
				d.queues[d.pods[i].queue].waiting++
			}
			s.Queues = make([]QueueSample, len(d.queues))
			for q := range d.queues {
				s.Queues[q] = QueueSample{AllocatedPct: 100 * float64(d.queues[q].alloc) / float64(d.capacity), Waiting: d.queues[q].waiting}
			}
		}
		res.Series = append(res.Series, s)
		// The next cycle: the next period boundary at or after the next
		// arrival or departure.
		t := math.Inf(1)
		if next < len(d.pods) {
			t = d.pods[next].arrive
		}
		if len(d.running) > 0 {
			t = min(t, d.pods[d.running[0]].ends)
		}
		t = min(t, d.nextEligible())
		if d.stopped {
			t = d.now // the victims stopped now: their room is free from now
		}
		end := next == len(d.pods) && (len(d.waiting) == 0 || len(d.running) == 0) && !d.stopped
		// Every pod has arrived, and either all started or nothing runs
		// that could make room for the rest (nor was just freed for them):
		// they never start.
		step := d.window - d.now
		if !end {
			step = math.Max(d.cfg.Period, math.Ceil((t-d.now)/d.cfg.Period)*d.cfg.Period)
		}
		if d.now < d.window {
			span := math.Min(d.now+step, d.window) - d.now
			integral += float64(d.alloc) * span
			for q := range d.queues {
				d.queues[q].integral += float64(d.queues[q].alloc) * span
			}
			if d.mig != nil {
				d.mig.integrate(d, span)
			}
		}
		if end {
			break
		}
		d.now += step
	}
	d.report(res, integral)
	if d.mig != nil {
		d.mig.report(d, res)
	}
	return nil
}

// cycle runs one scheduling cycle over the waiting pods on the scheduling
// core (package dispatch), one core cycle as the Kubernetes scheduler runs
// it: the pods that fit are placed, and those that fit nowhere may name
// victims among the pods of preemptible queues that ran before this cycle.
// The victims stop at once and wait again; the pods that named them are
// placed in the next cycle, the room their victims freed held for them
// (the core's nominations) so that the pods served before them cannot take
// it.
func (d *dynReplay) cycle(res *DynamicResult) error {
	pre := d.preemptible()
	for _, n := range d.held {
		d.dirty[n] = true // its hold may have ended: room for the others
	}
	d.markSkips(pre)
	d.held = d.nominated()
	d.stopped = false
	d.pre = pre
	rd, err := d.core.Cycle(simTime(d.now), d.frame(pre.running))
	d.pre = nil
	if err != nil {
		return err
	}
	if rd.Tried == 0 {
		return nil
	}
	res.Cycles++
	if err := d.apply(rd); err != nil {
		return err
	}
	for _, e := range rd.Evictions {
		for _, v := range e.Victims {
			j, _, err := d.podOf(v.ID)
			if err != nil {
				return err
			}
			if !d.pods[j].running {
				continue // a gang's other member, stopped already
			}
			if err := d.stop(j, v.Kind, res); err != nil {
				return err
			}
			d.stopped = true
		}
	}
	kept := d.waiting[:0]
	for _, i := range d.waiting {
		if !d.pods[i].running {
			kept = append(kept, i)
		}
	}
	d.waiting = kept
	return nil
}

// nominated are the nodes whose room the core holds for preemptors now.
func (d *dynReplay) nominated() []int {
	names := d.core.NominatedNodes()
	if len(names) == 0 {
		return nil
	}
	if d.nodeAt == nil {
		d.nodeAt = make(map[string]int, len(d.c.Nodes))
		for i := range d.c.Nodes {
			d.nodeAt[d.c.Nodes[i].Name] = i
		}
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if i, ok := d.nodeAt[n]; ok {
			out = append(out, i)
		}
	}
	return out
}

// markSkips marks the waiting pods a cycle would turn down as it last did
// (Frame.Skip): those invalid, and those that fit nowhere when no node
// that gained room since the last cycle passes the engine's feasibility
// checks for them (elsewhere the cluster only filled up) and they cannot
// name victims among pre's candidates (nil: none). The nodes that gained
// room are then forgotten: the cycle sees them.
func (d *dynReplay) markSkips(pre *candidates) {
	for _, i := range d.waiting {
		p := &d.pods[i]
		p.skip = false
		if !p.tried || d.cfg.TryAll {
			continue
		}
		switch p.status {
		case cycle.Invalid:
			p.skip = true // waiting does not help
		case cycle.NoFit, cycle.GangMisfit:
			p.skip = !d.mayFit(p) && !pre.may(d, p)
		}
	}
	clear(d.dirty)
}

// frame is the world a core cycle decides on now, running its preemption
// candidates.
func (d *dynReplay) frame(running []cycle.Running) dispatch.Frame {
	return dispatch.Frame{Cluster: d.c, Policy: d.pol, Queues: d.tree, Usage: d.usage(), Running: running,
		Translate: d.translate, Gang: d.gangSpec, Skip: d.skipped, Arrival: d.arrival}
}

// arrival is the core's Frame.Arrival: a pod, or one of its gang's
// members (as the cluster sees their pods arrive), teaches its part.
func (d *dynReplay) arrival(id string) (placement.Policy, []placement.Pod, bool) {
	i, m, err := d.podOf(id)
	if err != nil {
		return nil, nil, false
	}
	return nil, d.pods[i].parts[m : m+1], true
}

// observe tells a policy that learns of pod i's arrival when no core
// runs (the MIG variant: the pod as the setup places it); the core tells
// it otherwise (arrival).
func (d *dynReplay) observe(i int) {
	if d.observer == nil {
		return
	}
	for _, p := range d.pods[i].parts {
		d.observer.Observe(&p)
	}
}

// enqueue gives pod i, waiting from now, to the core: one workload, or
// its gang's members.
func (d *dynReplay) enqueue(i int) {
	p := &d.pods[i]
	arrived, seq := p.arrive, uint64(i)
	if p.remade {
		// Stopped, it is made again as a controller makes a pod anew: it
		// arrives at its stop, after the trace's pods of that time.
		arrived, seq = p.since, uint64(len(d.pods)+i)
	}
	for m := range p.parts {
		it := dispatch.Item{ID: p.ids[m], Priority: p.prio, Gang: p.gang, Arrived: simTime(arrived), Since: simTime(p.since),
			Seq: seq<<memberBits | uint64(m)} // arrival order, then a gang's members in order
		if d.tree != nil {
			it.Queue = d.queues[p.queue].name
		}
		d.core.Add(it)
	}
}

// memberBits is how many low bits of an Item's Seq number a gang's member.
const memberBits = 16

// translate is the core's translation of workload id: a pod, or one of
// its gang's members. One that cannot name victims among the cycle's
// candidates (candidates.may) is told to name none, which spares the
// cycle its search.
func (d *dynReplay) translate(id string) (cycle.Workload, error) {
	i, m, err := d.podOf(id)
	if err != nil {
		return cycle.Workload{}, err
	}
	p := &d.pods[i]
	w := cycle.Workload{ID: id, Priority: p.prio, Gang: p.gang, Parts: p.parts[m : m+1]}
	if d.tree != nil {
		w.Queue = d.queues[p.queue].name
	}
	if d.cfg.Preemption {
		w.AwaitingVictims = !d.pre.may(d, p)
	}
	return w, nil
}

// gangSpec is a gang's definition: all its members, at once.
func (d *dynReplay) gangSpec(key string) dispatch.GangSpec {
	i, err := strconv.Atoi(strings.TrimPrefix(key, "gang-"))
	if err != nil || i < 0 || i >= len(d.pods) || d.pods[i].gang != key {
		return dispatch.GangSpec{Err: fmt.Errorf("unknown gang %q", key)}
	}
	return dispatch.GangSpec{Min: len(d.pods[i].parts)}
}

// skipped reports whether the pod workload id belongs to is marked to be
// left out (markSkips).
func (d *dynReplay) skipped(id string) bool {
	i, _, err := d.podOf(id)
	return err == nil && d.pods[i].skip
}

// apply records a core cycle's outcome: placed pods start (a gang once all
// its members are placed) and leave the core; the others keep their
// status for markSkips.
func (d *dynReplay) apply(rd dispatch.Ready) error {
	var placed map[int]int
	for _, b := range rd.Binds {
		i, m, err := d.podOf(b.ID)
		if err != nil {
			return err
		}
		p := &d.pods[i]
		p.tried, p.status = true, cycle.Placed
		if len(b.Decisions) != 1 {
			return fmt.Errorf("workload %s: %d decisions for one part", b.ID, len(b.Decisions))
		}
		if p.decisions == nil {
			p.decisions = make([]placement.Decision, len(p.parts))
		}
		if p.orders == nil {
			p.orders = make([]uint64, len(p.parts))
		}
		p.decisions[m], p.orders[m] = b.Decisions[0], b.Order
		if d.cfg.Record {
			dec := b.Decisions[0]
			d.rec.Binds = append(d.rec.Binds, DynamicBind{Time: d.now, Pod: p.Pod.Name, Part: m, Node: d.c.Nodes[dec.Node].Name, GPUs: slices.Clone(dec.GPUs)})
		}
		d.core.Bound(b.ID)
		if placed == nil {
			placed = map[int]int{}
		}
		if placed[i]++; placed[i] == len(p.parts) {
			d.begin(i)
		}
	}
	for i, n := range placed {
		if n != len(d.pods[i].parts) {
			return fmt.Errorf("pod %s: %d of its %d gang members placed (a gang is all or nothing)", d.pods[i].Pod.Name, n, len(d.pods[i].parts))
		}
	}
	for _, w := range rd.Waits {
		i, _, err := d.podOf(w.ID)
		if err != nil {
			return err
		}
		d.pods[i].tried, d.pods[i].status = true, w.Status
	}
	return nil
}

// begin starts pod i now: it holds its parts' decisions (booked by the
// cycle) until it ends or is stopped.
func (d *dynReplay) begin(i int) {
	p := &d.pods[i]
	p.running, p.started = true, true
	p.waited += d.now - p.since
	p.start = d.now
	p.ends = d.now + float64(p.Duration)
	p.use = p.need
	if d.mig == nil {
		p.use = queueing.Resources{}
		for m := range p.parts {
			p.use = p.use.Add(cycle.Granted(d.c, p.parts[m], p.decisions[m]))
		}
	}
	q := &d.queues[p.queue]
	q.used = q.used.Add(p.use)
	q.alloc += p.gpu
	d.alloc += p.gpu
	if m := d.mig; m != nil {
		m.held += p.held
		m.mem += p.memHeld
		m.asked += float64(p.Pod.TotalGPUMilli())
	}
	j := sort.Search(len(d.running), func(j int) bool { return d.pods[d.running[j]].ends > p.ends })
	d.running = append(d.running, 0)
	copy(d.running[j+1:], d.running[j:])
	d.running[j] = i
}

// release frees what pod i holds; the nodes it leaves gain room.
func (d *dynReplay) release(i int) error {
	p := &d.pods[i]
	for m := range p.parts {
		if err := d.c.Release(&p.parts[m], p.decisions[m]); err != nil {
			return fmt.Errorf("release %s: %w", p.parts[m].Name, err)
		}
		d.dirty[p.decisions[m].Node] = true
	}
	if m := d.mig; m != nil {
		m.held -= p.held
		m.mem -= p.memHeld
		m.asked -= float64(p.Pod.TotalGPUMilli())
		for _, dec := range p.decisions {
			m.touch(d.c, dec.Node)
		}
	}
	p.running, p.decisions = false, nil
	q := &d.queues[p.queue]
	q.used = q.used.Sub(p.use)
	q.alloc -= p.gpu
	d.alloc -= p.gpu
	return nil
}

// stop stops running pod i for a preemption of kind k: it waits again,
// from now, and will restart from the beginning.
func (d *dynReplay) stop(i int, k preemption.Kind, res *DynamicResult) error {
	if err := d.release(i); err != nil {
		return err
	}
	j := 0
	for d.running[j] != i {
		j++
	}
	d.running = append(d.running[:j], d.running[j+1:]...)
	p := &d.pods[i]
	p.started, p.tried, p.since, p.remade = false, false, d.now, true
	if d.cfg.Record {
		res.Stops = append(res.Stops, DynamicStop{Time: d.now, Pod: p.Pod.Name})
	}
	d.waiting = append(d.waiting, i)
	d.enqueue(i) // a new arrival, as the cluster's policy sees the pod made again
	q := &d.queues[p.queue]
	lost := float64(p.gpu) * (d.now - p.start)
	q.lost += lost
	res.LostGPUHours += lost / 1000 / 3600
	switch k {
	case preemption.ByReclaim:
		q.reclaimed++
		res.Reclaims++
	default:
		q.preempted++
		res.Preemptions++
	}
	return nil
}

// podOf returns the pod and part a workload ID names.
func (d *dynReplay) podOf(id string) (int, int, error) {
	pod, part, gang := strings.Cut(id, "/")
	i, err := strconv.Atoi(pod)
	if err != nil || i < 0 || i >= len(d.pods) {
		return 0, 0, fmt.Errorf("outcome for unknown workload %q", id)
	}
	m := 0
	if gang {
		if m, err = strconv.Atoi(part); err != nil || m < 0 || m >= len(d.pods[i].parts) {
			return 0, 0, fmt.Errorf("outcome for unknown workload %q", id)
		}
	}
	return i, m, nil
}

func (d *dynReplay) usage() map[string]queueing.Resources {
	u := make(map[string]queueing.Resources, len(d.queues))
	for _, q := range d.queues {
		u[q.name] = q.used
	}
	return u
}

// mayFit reports whether one of p's parts passes the engine's feasibility
// checks on a node that gained room since the last cycle.
func (d *dynReplay) mayFit(p *dynPod) bool {
	for m := range p.parts {
		if mayFit(d.c, d.dirty, &p.parts[m]) {
			return true
		}
	}
	return false
}

// candidates are a cycle's preemption candidates: the running pods of
// preemptible queues, as the cycle sees them, and what the replay needs
// to tell which waiting pods might name victims among them.
type candidates struct {
	on      bool
	running []cycle.Running
	// per queue: how many candidates have run long enough, their lowest
	// priority and their GPU compute; total: all queues' count.
	n     []int
	low   []int32
	gpu   []int64
	total int
}

func (d *dynReplay) preemptible() *candidates {
	pc := &candidates{on: d.cfg.Preemption}
	if !pc.on {
		return pc
	}
	n := len(d.queues)
	pc.n, pc.low, pc.gpu = make([]int, n), make([]int32, n), make([]int64, n)
	rules := preemption.Rules{MinRuntime: time.Duration(d.cfg.MinRuntime * float64(time.Second))}
	now := simTime(d.now)
	for _, i := range d.running {
		p := &d.pods[i]
		q := p.queue
		if !d.queues[q].preemptible {
			continue
		}
		started := simTime(p.start)
		for m := range p.parts {
			r := cycle.Running{ID: p.ids[m], Priority: p.prio, Gang: p.gang, Started: started, Order: p.orders[m],
				Parts: p.parts[m : m+1], Decisions: p.decisions[m : m+1]}
			if d.tree != nil {
				r.Queue = d.queues[q].name
			}
			pc.running = append(pc.running, r)
		}
		if p.gang != "" {
			continue // never taken below its minimum (all its members): no candidate
		}
		if !rules.RanLongEnough(started, now) {
			continue
		}
		if pc.n[q] == 0 || p.prio < pc.low[q] {
			pc.low[q] = p.prio
		}
		pc.n[q]++
		pc.gpu[q] += p.gpu
		pc.total++
	}
	return pc
}

// nextEligible is, with preemption, a minimum runtime and pods waiting,
// the first time after now a running pod of a preemptible queue has run
// long enough to be a victim (a cycle is due then); +Inf otherwise.
func (d *dynReplay) nextEligible() float64 {
	t := math.Inf(1)
	if !d.cfg.Preemption || d.cfg.MinRuntime <= 0 || len(d.waiting) == 0 {
		return t
	}
	for _, i := range d.running {
		p := &d.pods[i]
		if e := p.start + d.cfg.MinRuntime; d.queues[p.queue].preemptible && p.gang == "" && e > d.now {
			t = min(t, e)
		}
	}
	return t
}

// may reports whether waiting pod p might name victims in this cycle: a
// necessary condition of the cycle's rules, so that the pods skipped would
// name none. Priority: its queue has a candidate of lower priority.
// Reclaim: another queue has candidates, and p's queue, even with all its
// own candidates stopped, stays within its guarantee with p (for a gang,
// with all its members).
func (pc *candidates) may(d *dynReplay, p *dynPod) bool {
	if pc == nil || !pc.on {
		return false
	}
	q := p.queue
	if pc.n[q] > 0 && pc.low[q] < p.prio {
		return true
	}
	g := d.queues[q].guaranteed
	if g == 0 || pc.total-pc.n[q] == 0 {
		return false
	}
	return d.queues[q].used.GPUMilli-pc.gpu[q]+p.need.GPUMilli <= g
}

// report fills res from the replay's end state.
func (d *dynReplay) report(res *DynamicResult, integral float64) {
	var all []float64
	per := make([][]float64, len(d.queues))
	started := make([]int, len(d.queues))
	pods := make([]int, len(d.queues))
	for i := range d.pods {
		p := &d.pods[i]
		pods[p.queue]++
		if !p.started {
			continue
		}
		all = append(all, p.waited)
		per[p.queue] = append(per[p.queue], p.waited)
		started[p.queue]++
	}
	res.Started = len(all)
	res.NeverStarted = len(d.pods) - res.Started
	if d.window > 0 {
		res.AllocatedPct = 100 * integral / (float64(d.capacity) * d.window)
	}
	res.DelayMean, res.DelayP50, res.DelayP95, res.DelayP99 = delayStats(all)
	if d.cfg.Queues == nil {
		return
	}
	for q := range d.queues {
		dq := &d.queues[q]
		r := QueueResult{Queue: dq.name, Pods: pods[q], Started: started[q], NeverStarted: pods[q] - started[q],
			Preemptions: dq.preempted, Reclaims: dq.reclaimed, LostGPUHours: dq.lost / 1000 / 3600}
		if d.window > 0 {
			r.AllocatedPct = 100 * dq.integral / (float64(d.capacity) * d.window)
		}
		r.DelayMean, r.DelayP50, r.DelayP95, r.DelayP99 = delayStats(per[q])
		res.Queues = append(res.Queues, r)
	}
}
