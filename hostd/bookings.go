package hostd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/booked"
	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/internal/safefs"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/queueing"
)

// BookingsFile, in the state folder, is the daemon's booking journal: one
// JSON line per change of what the placement engine holds booked (see
// Booking). It is an audit trail, written after each change and never read
// by the daemon: replaying it shows what every GPU had booked at any time.
const BookingsFile = "bookings.log"

// bookingsMaxBytes is the journal's size at which it is moved to
// BookingsFile+".1" (replacing an older one) and started afresh.
const bookingsMaxBytes = 8 << 20

// Booking is one line of the booking journal.
type Booking struct {
	Time time.Time `json:"time"`
	// Op is "start" (a daemon started: nothing is booked until the lines
	// that follow re-book the jobs it adopted), "book" or "release".
	Op  string `json:"op"`
	Job string `json:"job,omitempty"`
	// GPUs are the job's booked amounts on each of its GPUs.
	GPUs []BookedGPU `json:"gpus,omitempty"`
}

// BookedGPU is what one booking holds on one GPU.
type BookedGPU struct {
	UUID         string `json:"uuid"`
	ComputeMilli int64  `json:"computeMilli"`
	MemoryMiB    int64  `json:"memoryMiB"`
}

// journal appends Bookings to the state folder's journal. Writes are not
// synced: a crash may lose the last lines, never reorder them.
type journal struct {
	path string
	f    *os.File
	size int64
}

func openJournal(stateDir string) (*journal, error) {
	j := &journal{path: filepath.Join(stateDir, BookingsFile)}
	if err := j.open(); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *journal) open() error {
	f, err := safefs.OpenFile(filepath.Dir(j.path), filepath.Base(j.path), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("booking journal: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("booking journal: %w", err)
	}
	j.f, j.size = f, fi.Size()
	return nil
}

// write appends b as one line (one write call, so lines never interleave).
func (j *journal) write(b Booking) error {
	if j == nil || j.f == nil {
		return nil
	}
	line, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("booking journal: %w", err)
	}
	line = append(line, '\n')
	if j.size+int64(len(line)) > bookingsMaxBytes && b.Op == "start" {
		// Rotate only at a start line, so each file replays on its own.
		if err := j.f.Close(); err != nil {
			return fmt.Errorf("booking journal: %w", err)
		}
		if err := os.Rename(j.path, j.path+".1"); err != nil {
			return fmt.Errorf("booking journal: %w", err)
		}
		if err := j.open(); err != nil {
			return err
		}
	}
	n, err := j.f.Write(line)
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("booking journal: %w", err)
	}
	return nil
}

func (j *journal) close() error {
	if j == nil || j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// The daemon's bookings are the scheduling core's books
// (dispatch.Core.Books): its nodes are set from the inventory once (New),
// a job's hold is booked when it starts or is adopted and released when
// it ends, and a cycle decides on them as they stand (no copy per pass).

// engine is the cluster as booked. Its node d.at(ni) is d.cfg.Nodes[ni].
func (d *Daemon) engine() *placement.Cluster { return d.core.Books().Cluster() }

// at is configured node ni's position in the books (ni in range).
func (d *Daemon) at(ni int) int { return d.pos[ni] }

// setNodes sets the books' nodes from the inventory and where each lands.
func (d *Daemon) setNodes() error {
	b := d.core.Books()
	for _, n := range d.cfg.Nodes {
		if _, ok := b.Index(n.Name); ok {
			return fmt.Errorf("inventory: node name %q repeated", n.Name)
		}
		if err := b.SetNode(n, ""); err != nil {
			return fmt.Errorf("inventory: %w", err)
		}
	}
	d.pos, d.node = make([]int, len(d.cfg.Nodes)), make([]int, len(d.cfg.Nodes))
	for ni, n := range d.cfg.Nodes {
		bi, _ := b.Index(n.Name)
		d.pos[ni], d.node[bi] = bi, ni
	}
	return nil
}

// holdOf is what job j holds at dec (its node by configured position), as
// the books keep it: its shares (an instance to create named by its
// parent, as the engine books it), queue, priority and start; Stopping
// once a stop was asked (never a victim).
func (d *Daemon) holdOf(j api.Job, dec placement.Decision) (booked.Hold, error) {
	if dec.Node < 0 || dec.Node >= len(d.cfg.Nodes) {
		return booked.Hold{}, fmt.Errorf("node %d out of range", dec.Node)
	}
	shares, err := placement.Shares(&d.engine().Nodes[d.at(dec.Node)], &d.cfg.Nodes[dec.Node], j.GPU, dec, d.cfg.Catalog)
	if err != nil {
		return booked.Hold{}, err
	}
	h := booked.Hold{ID: j.ID, Node: d.cfg.Nodes[dec.Node].Name, Key: fmt.Sprint(dec.GPUs, dec.MIG),
		Queue: queueing.QueueOr(j.Queue), Priority: int32(j.Priority), Stopping: j.StopRequested}
	if len(shares) > 0 {
		h.Groups = [][]binding.Share{shares}
	}
	if j.Started != nil {
		h.Started = *j.Started
	}
	return h, nil
}

// bookLocked books job j's decision in the books (replacing what the
// cycle assumed for it) and journals it. A booking that does not fit is
// not kept.
func (d *Daemon) bookLocked(j api.Job, dec placement.Decision) error {
	h, err := d.holdOf(j, dec)
	if err != nil {
		return err
	}
	b := d.core.Books()
	b.Release(j.ID) // booked again below: the journal shows what this booking moved
	before := d.freeOn(dec)
	if err := b.Book(h); err != nil {
		b.Release(j.ID)
		return err
	}
	d.journalLocked("book", j.ID, dec, before)
	return nil
}

// restampLocked books again how running job j runs (its start, a stop
// asked), keeping what it holds; nothing when it holds nothing.
func (d *Daemon) restampLocked(j api.Job) {
	if held, _ := d.core.Books().Has(j.ID); !held {
		return
	}
	h, err := d.holdOf(j, decisionOf(j))
	if err == nil {
		err = d.core.Books().Book(h) // same key: what it holds stays as booked
	}
	if err != nil {
		d.cfg.Log.Error("book running job", "job", j.ID, "err", err)
	}
}

// releaseLocked releases job j's decision and journals it.
func (d *Daemon) releaseLocked(j api.Job, dec placement.Decision) error {
	return d.releaseHoldLocked(j.ID, j.ID, dec)
}

// releaseHoldLocked releases hold id (job's, at dec) and journals it.
func (d *Daemon) releaseHoldLocked(id, job string, dec placement.Decision) error {
	b := d.core.Books()
	if held, _ := b.Has(id); !held {
		return fmt.Errorf("%s holds nothing booked", id)
	}
	before := d.freeOn(dec)
	b.Release(id)
	d.journalLocked("release", job, dec, before)
	return nil
}

// keepMIGLocked keeps the slices of ended run `workload` of job j booked
// until its MIG instances are destroyed (retryMIG releases them): the
// job's hold is booked again as held for none (a new run of the job books
// its own; no queue is charged for it, nor is it a victim).
func (d *Daemon) keepMIGLocked(workload string, j api.Job, dec placement.Decision) {
	h, err := d.holdOf(j, dec)
	if err != nil {
		d.cfg.Log.Error("keep MIG slices booked", "job", j.ID, "err", err)
		return
	}
	b := d.core.Books()
	b.Release(j.ID)
	h.ID, h.For = workload, []string{}
	if err := b.Book(h); err != nil {
		d.cfg.Log.Error("keep MIG slices booked", "job", j.ID, "err", err)
	}
}

// rebookLocked starts the books anew from the inventory and the running
// jobs (jobs: every job), after a cycle failed part way; the journal
// starts again as at a daemon start.
func (d *Daemon) rebookLocked(jobs []api.Job) {
	d.core.ResetBooks()
	if err := d.setNodes(); err != nil {
		d.cfg.Log.Error("book the inventory again", "err", err)
		return
	}
	if err := d.bookings.write(Booking{Time: d.cfg.Now().UTC(), Op: "start"}); err != nil {
		d.cfg.Log.Warn("write the booking journal", "err", err)
	}
	byID := map[string]api.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
		if j.State != api.Running {
			continue
		}
		if err := d.bookLocked(j, decisionOf(j)); err != nil {
			d.cfg.Log.Error("book running job again", "job", j.ID, "err", err)
		}
	}
	for w, r := range d.migRetry {
		if j, ok := byID[r.job]; ok && r.dec != nil {
			d.keepMIGLocked(w, j, *r.dec)
		}
	}
}

// freeOn returns the free compute and memory of dec's GPUs.
func (d *Daemon) freeOn(dec placement.Decision) [][2]int64 {
	if dec.Node < 0 || dec.Node >= len(d.cfg.Nodes) {
		return nil
	}
	gpus := d.engine().Nodes[d.at(dec.Node)].GPUs
	out := make([][2]int64, len(dec.GPUs))
	for i, gi := range dec.GPUs {
		if gi >= 0 && gi < len(gpus) {
			out[i] = [2]int64{gpus[gi].FreeMilli, gpus[gi].FreeMemoryMiB}
		}
	}
	return out
}

// journalLocked records the amounts a book or release moved on each GPU
// (read from the engine's free amounts before and after, so the journal
// shows what was booked, not what was meant to be).
func (d *Daemon) journalLocked(op, id string, dec placement.Decision, before [][2]int64) {
	after := d.freeOn(dec)
	uuids := d.gpuUUIDs(dec.Node)
	b := Booking{Time: d.cfg.Now().UTC(), Op: op, Job: id}
	for i, gi := range dec.GPUs {
		if i >= len(before) || i >= len(after) {
			break
		}
		milli, mem := before[i][0]-after[i][0], before[i][1]-after[i][1]
		if op == "release" {
			milli, mem = -milli, -mem
		}
		b.GPUs = append(b.GPUs, BookedGPU{UUID: uuids[d.engine().Nodes[d.at(dec.Node)].GPUs[gi].Index], ComputeMilli: milli, MemoryMiB: mem})
	}
	if err := d.bookings.write(b); err != nil {
		d.cfg.Log.Warn("write the booking journal", "err", err)
	}
}
