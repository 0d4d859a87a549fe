package hostd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/internal/safefs"
	"github.com/tessera-gpu/tessera/placement"
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

// bookLocked books job j's decision in the placement engine and journals it.
func (d *Daemon) bookLocked(j api.Job, dec placement.Decision) error {
	pod := podOf(j)
	before := d.freeOn(dec)
	if err := d.cluster.Apply(&pod, dec); err != nil {
		return err
	}
	d.journalLocked("book", j.ID, dec, before)
	return nil
}

// releaseLocked releases job j's decision and journals it.
func (d *Daemon) releaseLocked(j api.Job, dec placement.Decision) error {
	pod := podOf(j)
	before := d.freeOn(dec)
	if err := d.cluster.Release(&pod, dec); err != nil {
		return err
	}
	d.journalLocked("release", j.ID, dec, before)
	return nil
}

// freeOn returns the free compute and memory of dec's GPUs.
func (d *Daemon) freeOn(dec placement.Decision) [][2]int64 {
	if dec.Node < 0 || dec.Node >= len(d.cluster.Nodes) {
		return nil
	}
	gpus := d.cluster.Nodes[dec.Node].GPUs
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
		b.GPUs = append(b.GPUs, BookedGPU{UUID: uuids[d.cluster.Nodes[dec.Node].GPUs[gi].Index], ComputeMilli: milli, MemoryMiB: mem})
	}
	if err := d.bookings.write(b); err != nil {
		d.cfg.Log.Warn("write the booking journal", "err", err)
	}
}
