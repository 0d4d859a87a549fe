package grant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Options describe a new region.
type Options struct {
	// Devices is the number of records, [1, 16]; record i is the
	// container's CUDA device ordinal i.
	Devices int
	// StaleAfter is the heartbeat timeout the library applies, [1ms, 1h]
	// in whole milliseconds. The arbiter must beat at least every
	// StaleAfter/4.
	StaleAfter time.Duration
	// Epoch is informational (e.g. the arbiter's start time).
	Epoch uint64
	// Tokens are the initial balances, one per device (missing ones are 0).
	Tokens []int64
	// Heartbeat is the first heartbeat, CLOCK_MONOTONIC ns; must be > 0.
	Heartbeat uint64
}

func (o Options) validate() error {
	switch {
	case o.Devices < 1 || o.Devices > MaxDevices:
		return fmt.Errorf("devices: must be in [1, %d], got %d", MaxDevices, o.Devices)
	case o.StaleAfter < time.Millisecond || o.StaleAfter > time.Hour || o.StaleAfter%time.Millisecond != 0:
		return fmt.Errorf("staleAfter: must be whole milliseconds in [1ms, 1h], got %v", o.StaleAfter)
	case len(o.Tokens) > o.Devices:
		return fmt.Errorf("tokens: at most one per device (%d), got %d", o.Devices, len(o.Tokens))
	case o.Heartbeat == 0:
		return errors.New("heartbeat: must be > 0 (0 means never beaten)")
	}
	return nil
}

// Region is a published grant region mapped read-write.
type Region struct {
	path string
	ndev int
	mem  []byte
}

// Create writes a region for path: it fills a temporary file in the same
// folder (header, records, heartbeat, then the magic with release order),
// makes it mode 0666 and renames it onto path, replacing any previous
// region, so a library attached to the old one moves over once that goes
// stale.
func Create(path string, o Options) (*Region, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("grant region %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("grant region %s: %w", path, err)
	}
	tmp := f.Name()
	r, err := initialise(f, o)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o666) // the container maps it read-write
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		if r != nil {
			r.Close()
		}
		os.Remove(tmp)
		return nil, fmt.Errorf("grant region %s: %w", path, err)
	}
	r.path = path
	return r, nil
}

func initialise(f *os.File, o Options) (*Region, error) {
	size := Size(o.Devices)
	if err := f.Truncate(int64(size)); err != nil {
		return nil, fmt.Errorf("size: %w", err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	r := &Region{ndev: o.Devices, mem: mem}
	le := binary.LittleEndian
	le.PutUint16(mem[offVersionMajor:], VersionMajor)
	le.PutUint16(mem[offVersionMinor:], VersionMinor)
	le.PutUint32(mem[offHeaderSize:], HeaderSize)
	le.PutUint32(mem[offRecordSize:], RecordSize)
	le.PutUint32(mem[offNdev:], uint32(o.Devices))
	le.PutUint32(mem[offStaleAfterMs:], uint32(o.StaleAfter/time.Millisecond))
	le.PutUint64(mem[offEpoch:], o.Epoch)
	for i, n := range o.Tokens {
		atomic.StoreInt64(r.tokens(i), n)
	}
	r.Beat(o.Heartbeat)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&mem[offMagic])), Magic) // last: publishes
	return r, nil
}

// Path is where the region was published.
func (r *Region) Path() string { return r.path }

// Devices is the number of records.
func (r *Region) Devices() int { return r.ndev }

// Close unmaps the region. The file stays: a library keeps using its
// tokens and then applies its failure policy once the heartbeat is stale.
func (r *Region) Close() error {
	if r.mem == nil {
		return nil
	}
	err := syscall.Munmap(r.mem)
	r.mem = nil
	if err != nil {
		return fmt.Errorf("grant region %s: munmap: %w", r.path, err)
	}
	return nil
}

// The mapping is page-aligned, and every atomic field sits on its natural
// alignment within it (64-byte header and records).
func (r *Region) word(dev, off int) unsafe.Pointer {
	return unsafe.Pointer(&r.mem[HeaderSize+dev*RecordSize+off])
}
func (r *Region) tokens(dev int) *int64 { return (*int64)(r.word(dev, offTokens)) }

// Beat stores the heartbeat (CLOCK_MONOTONIC ns).
func (r *Region) Beat(ns uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.mem[offHeartbeat])), ns)
}

// Heartbeat returns the stored heartbeat.
func (r *Region) Heartbeat() uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[offHeartbeat])))
}

// Add adds n tokens to device dev's record and returns the new balance.
func (r *Region) Add(dev int, n int64) int64 { return atomic.AddInt64(r.tokens(dev), n) }

// LowerTo revokes tokens above ceiling with a compare-and-swap loop, so
// that concurrent takes by the library are never lost. It returns the
// balance it left and how many tokens it took back.
func (r *Region) LowerTo(dev int, ceiling int64) (balance, revoked int64) {
	p := r.tokens(dev)
	for {
		cur := atomic.LoadInt64(p)
		if cur <= ceiling {
			return cur, 0
		}
		if atomic.CompareAndSwapInt64(p, cur, ceiling) {
			return ceiling, cur - ceiling
		}
	}
}

// Counters is a snapshot of one record.
type Counters struct {
	// Tokens is the balance (negative is debt).
	Tokens int64
	// Waiters is the number of the container's threads waiting now.
	Waiters uint64
	// Waits is the cumulative number of launches that had to wait.
	Waits uint64
	// Ungated is the cumulative number of launches run without a token
	// while the region was stale (fail-open).
	Ungated uint64
}

// Read returns device dev's record.
func (r *Region) Read(dev int) Counters {
	return Counters{
		Tokens:  atomic.LoadInt64(r.tokens(dev)),
		Waiters: atomic.LoadUint64((*uint64)(r.word(dev, offWaiters))),
		Waits:   atomic.LoadUint64((*uint64)(r.word(dev, offWaits))),
		Ungated: atomic.LoadUint64((*uint64)(r.word(dev, offUngated))),
	}
}
