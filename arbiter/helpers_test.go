package arbiter

import (
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/tessera-gpu/tessera/arbiter/acct"
	"github.com/tessera-gpu/tessera/binding"
)

// fakeClock moves only when told; After channels fire on Advance.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeTimer
	asked   chan struct{} // one value per After call
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_000_000, 0), asked: make(chan struct{}, 1000)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, fakeTimer{c.now.Add(d), ch})
	c.asked <- struct{}{}
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// fakeMono is a heartbeat clock that ticks 1ms per call.
func fakeMono() func() (uint64, error) {
	var n atomic.Uint64
	return func() (uint64, error) { return n.Add(1_000_000), nil }
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeLib plays libtessera-intercept on a client's grant region: it maps
// the file read-write and takes tokens the way the library does.
type fakeLib struct{ mem []byte }

func attach(t *testing.T, dir string) *fakeLib {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, RegionFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	return &fakeLib{mem}
}

func (l *fakeLib) word(dev, off int) unsafe.Pointer { return unsafe.Pointer(&l.mem[64+64*dev+off]) }
func (l *fakeLib) tokens(dev int) int64             { return atomic.LoadInt64((*int64)(l.word(dev, 0))) }

// launch takes up to n tokens one by one and returns how many it got; when
// it runs out it marks one waiter (a blocked launch), as the library does.
func (l *fakeLib) launch(dev int, n int64) int64 {
	p := (*int64)(l.word(dev, 0))
	var got int64
	for ; got < n; got++ {
		if atomic.AddInt64(p, -1) < 0 {
			atomic.AddInt64(p, 1)
			atomic.StoreUint64((*uint64)(l.word(dev, 8)), 1)
			atomic.AddUint64((*uint64)(l.word(dev, 16)), 1)
			return got
		}
	}
	atomic.StoreUint64((*uint64)(l.word(dev, 8)), 0)
	return got
}

// ranUngated counts n launches run without a token (fail-open).
func (l *fakeLib) ranUngated(dev int, n uint64) { atomic.AddUint64((*uint64)(l.word(dev, 24)), n) }

// rest clears the waiter: the client stopped launching.
func (l *fakeLib) rest(dev int) { atomic.StoreUint64((*uint64)(l.word(dev, 8)), 0) }

func (l *fakeLib) heartbeat() uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&l.mem[24])))
}

// writeAcct writes an accounting file for key in dir with one live process
// holding bytes on each device.
func writeAcct(t *testing.T, dir, key string, bytes ...uint64) {
	t.Helper()
	b := make([]byte, acct.FileSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], acct.Magic)
	le.PutUint16(b[4:], 1)
	le.PutUint32(b[8:], acct.HeaderSize)
	le.PutUint32(b[12:], acct.SlotSize)
	le.PutUint32(b[16:], acct.Slots)
	le.PutUint32(b[20:], acct.Devices)
	le.PutUint32(b[acct.HeaderSize:], 4242)
	for d, n := range bytes {
		le.PutUint64(b[acct.HeaderSize+16+8*d:], n)
	}
	tmp := acct.Path(dir, key) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, acct.Path(dir, key)); err != nil {
		t.Fatal(err)
	}
}

func gpuShare(uuid string, g, l int64) binding.Share {
	return binding.Share{UUID: uuid, ComputeMilli: g, ComputeLimitMilli: l, MemoryMiB: 1, MemoryLimitMiB: 1}
}

// shares returns key -> share on uuid from a snapshot.
func shares(a *Arbiter, uuid string) map[string]int64 {
	out := map[string]int64{}
	for _, s := range a.Snapshot() {
		if s.GPU == uuid {
			out[s.Key] = s.Share
		}
	}
	return out
}
