package intercept

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"
)

type region struct {
	path string
	mem  []byte
}

const grantMagic = 0x52475354 // "TSGR"

func monoNow() uint64 {
	var ts syscall.Timespec
	// CLOCK_MONOTONIC (1), the heartbeat's clock.
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}

// createRegion writes a region with one record per token count, publishing
// the magic last as the protocol requires.
func createRegion(tb testing.TB, path string, staleMs uint32, heartbeat uint64, tokens ...int64) *region {
	tb.Helper()
	size := 64 + 64*len(tokens)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		tb.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Munmap(mem) })
	r := &region{path: path, mem: mem}
	le := binary.LittleEndian
	le.PutUint16(mem[4:], 1)  // version_major
	le.PutUint16(mem[6:], 0)  // version_minor
	le.PutUint32(mem[8:], 64) // header_size
	le.PutUint32(mem[12:], 64)
	le.PutUint32(mem[16:], uint32(len(tokens)))
	le.PutUint32(mem[20:], staleMs)
	r.beat(heartbeat)
	for i, n := range tokens {
		atomic.StoreInt64(r.tokens(i), n)
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&mem[0])), grantMagic)
	return r
}

func (r *region) word(dev, off int) unsafe.Pointer { return unsafe.Pointer(&r.mem[64+64*dev+off]) }
func (r *region) tokens(dev int) *int64            { return (*int64)(r.word(dev, 0)) }
func (r *region) waiters(dev int) *uint64          { return (*uint64)(r.word(dev, 8)) }
func (r *region) waits(dev int) *uint64            { return (*uint64)(r.word(dev, 16)) }
func (r *region) ungated(dev int) *uint64          { return (*uint64)(r.word(dev, 24)) }
func (r *region) beat(ns uint64)                   { atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.mem[24])), ns) }

const (
	fresh   = 600_000 // stale_after_ms long enough that tests never see staleness
	ancient = 1       // a heartbeat long past on any machine
)

func TestLaunchesWaitForGrants(t *testing.T) {
	a := buildAll(t)
	for _, mode := range []string{"link", "proc2"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := a.base(t).with("TP_RESOLVE=" + mode)
			g := createRegion(t, filepath.Join(t.TempDir(), "grant"), fresh, monoNow(), 0)
			e["TESSERA_ARBITER_REGION"] = g.path
			p := a.start(t, e, "launch:kernel:3", "launch:ex_ptsz:2", "stats")

			eventually(t, "the first launch waits", func() bool { return atomic.LoadUint64(g.waiters(0)) == 1 })
			p.noOutputYet(t)
			atomic.AddInt64(g.tokens(0), 3)
			for i := 1; i <= 3; i++ {
				if got, want := p.next(t), fmt.Sprintf("launch kernel %d rc=0", i); got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			}
			eventually(t, "the fourth launch waits", func() bool {
				return atomic.LoadUint64(g.waits(0)) == 2 && atomic.LoadUint64(g.waiters(0)) == 1
			})
			p.noOutputYet(t)
			if n := atomic.LoadInt64(g.tokens(0)); n != 0 {
				t.Fatalf("tokens = %d after three granted launches, want 0", n)
			}
			atomic.AddInt64(g.tokens(0), 2)
			for _, want := range []string{"launch ex_ptsz 1 rc=0", "launch ex_ptsz 2 rc=0", "stats launches=5 managed=0 device=0"} {
				if got := p.next(t); got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			}
			if code := p.exitCode(t); code != 0 {
				t.Fatalf("exit %d", code)
			}
			if w := atomic.LoadUint64(g.waiters(0)); w != 0 {
				t.Fatalf("waiters = %d after exit", w)
			}
		})
	}
}

func TestEveryLaunchPathTakesAToken(t *testing.T) {
	a := buildAll(t)
	kinds := []string{"kernel", "kernel_ptsz", "ex", "ex_ptsz", "coop", "coop_ptsz", "graph", "graph_ptsz"}
	for _, mode := range resolveModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			g := createRegion(t, filepath.Join(t.TempDir(), "grant"), fresh, monoNow(), int64(len(kinds)))
			var args, want []string
			for _, k := range kinds {
				args = append(args, "launch:"+k+":1")
				want = append(want, "launch "+k+" 1 rc=0")
			}
			r := a.run(t, a.base(t).with("TP_RESOLVE="+mode, "TESSERA_ARBITER_REGION="+g.path), args...)
			expectLines(t, r, want...)
			if n, w := atomic.LoadInt64(g.tokens(0)), atomic.LoadUint64(g.waits(0)); n != 0 || w != 0 {
				t.Fatalf("tokens %d waits %d after %d launches with %d tokens; want 0 and 0", n, w, len(kinds), len(kinds))
			}
		})
	}
}

func TestGrantRecordPerDevice(t *testing.T) {
	a := buildAll(t)
	g := createRegion(t, filepath.Join(t.TempDir(), "grant"), fresh, monoNow(), 0, 4)
	r := a.run(t, a.base(t).with("TESSERA_ARBITER_REGION="+g.path), "dev:1", "launch:kernel:4")
	expectLines(t, r, "launch kernel 1 rc=0", "launch kernel 2 rc=0", "launch kernel 3 rc=0", "launch kernel 4 rc=0")
	if d0, d1 := atomic.LoadInt64(g.tokens(0)), atomic.LoadInt64(g.tokens(1)); d0 != 0 || d1 != 0 {
		t.Fatalf("tokens %d/%d, want 0/0: device 1's launches must draw on record 1", d0, d1)
	}
}

func TestComputeFailurePolicy(t *testing.T) {
	a := buildAll(t)
	launches := []string{"launch:kernel:2", "stats"}
	ran := []string{"launch kernel 1 rc=0", "launch kernel 2 rc=0", "stats launches=2 managed=0 device=0"}

	t.Run("no region configured: ungated, silent", func(t *testing.T) {
		t.Parallel()
		r := a.run(t, a.base(t).with("TESSERA_COMPUTE_FAIL=closed"), launches...)
		expectLines(t, r, ran...)
		if r.stderr != "" {
			t.Fatalf("unexpected stderr: %s", r.stderr)
		}
	})
	t.Run("missing region, open: ungated, logged once", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_ARBITER_REGION=" + filepath.Join(t.TempDir(), "absent"))
		r := a.run(t, e, launches...)
		expectLines(t, r, ran...)
		if n := strings.Count(r.stderr, "running kernel launches ungated"); n != 1 {
			t.Fatalf("want one fail-open warning, got %d:\n%s", n, r.stderr)
		}
	})
	t.Run("stale region, open: ungated and counted", func(t *testing.T) {
		t.Parallel()
		g := createRegion(t, filepath.Join(t.TempDir(), "grant"), 1000, ancient, 0)
		r := a.run(t, a.base(t).with("TESSERA_ARBITER_REGION="+g.path), launches...)
		expectLines(t, r, ran...)
		if n := atomic.LoadUint64(g.ungated(0)); n != 2 {
			t.Fatalf("ungated = %d, want 2", n)
		}
		if !strings.Contains(r.stderr, "is stale") {
			t.Fatalf("no stale warning:\n%s", r.stderr)
		}
	})
	t.Run("missing region, closed: waits until the arbiter publishes", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "grant")
		p := a.start(t, a.base(t).with("TESSERA_ARBITER_REGION="+path, "TESSERA_COMPUTE_FAIL=closed"), launches...)
		p.waitStderr(t, "wait for the arbiter")
		p.noOutputYet(t)
		createRegion(t, path, fresh, monoNow(), 2)
		for _, want := range ran {
			if got := p.next(t); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
		if code := p.exitCode(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("stale region, closed: waits for a heartbeat", func(t *testing.T) {
		t.Parallel()
		g := createRegion(t, filepath.Join(t.TempDir(), "grant"), 1000, ancient, 0)
		p := a.start(t, a.base(t).with("TESSERA_ARBITER_REGION="+g.path, "TESSERA_COMPUTE_FAIL=closed"), launches...)
		eventually(t, "the launch waits", func() bool { return atomic.LoadUint64(g.waiters(0)) == 1 })
		p.noOutputYet(t)
		g.beat(monoNow())
		atomic.AddInt64(g.tokens(0), 2)
		for _, want := range ran {
			if got := p.next(t); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
		if code := p.exitCode(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if n := atomic.LoadUint64(g.ungated(0)); n != 0 {
			t.Fatalf("ungated = %d under fail-closed", n)
		}
	})
}
