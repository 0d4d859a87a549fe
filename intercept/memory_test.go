package intercept

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestLimitHoldsInEveryResolutionMode(t *testing.T) {
	a := buildAll(t)
	for _, mode := range resolveModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := a.base(t).with("TP_RESOLVE="+mode, "TESSERA_MEMORY_LIMIT=1Gi")
			r := a.run(t, e, "alloc:mem:600Mi", "alloc:mem:600Mi", "info", "free:0", "alloc:mem:600Mi", "stats")
			expectLines(t, r,
				allocLine("mem", 600*mib, 0),
				allocLine("mem", 600*mib, cudaErrorOutOfMemory),
				infoLine(gib-600*mib, gib),
				"free 0 rc=0",
				allocLine("mem", 600*mib, 0),
				"stats launches=0 managed=0 device=2")
		})
	}
}

func TestEveryAllocationPathIsCapped(t *testing.T) {
	a := buildAll(t)
	const size = 256 * mib
	pitched := func(n int64) int64 { return n / 1100 * 1280 } // the fake aligns pitch to 256
	paths := []struct {
		path    string
		charged func(int64) int64 // device bytes the descriptor amounts to
		pitch   bool
	}{
		{"mem", nil, false},
		{"mem1", nil, false},
		{"pitch", pitched, true},
		{"pitch1", pitched, true},
		{"managed", nil, false},
		{"async", nil, false},
		{"async_ptsz", nil, false},
		{"pool", nil, false},
		{"pool_ptsz", nil, false},
		{"vmm", nil, false},
		{"array", nil, false},
		{"array3d", nil, false},
		{"mipmap", func(n int64) int64 { return n + n/2 }, false}, // two levels
	}
	for _, mode := range []string{"link", "proc2"} {
		for _, p := range paths {
			t.Run(mode+"/"+p.path, func(t *testing.T) {
				t.Parallel()
				charged := func(n int64) int64 {
					if p.charged == nil {
						return n
					}
					return p.charged(n)
				}
				ok := func(n int64) string {
					if p.pitch {
						return allocLine(p.path, n, 0) + " pitch=1280"
					}
					return allocLine(p.path, n, 0)
				}
				e := a.base(t).with("TP_RESOLVE="+mode, "TESSERA_MEMORY_LIMIT=1Gi")
				r := a.run(t, e,
					"alloc:"+p.path+":256Mi", "info", "alloc:"+p.path+":800Mi", "free:0", "info",
					"alloc:"+p.path+":600Mi")
				expectLines(t, r,
					ok(size),
					infoLine(gib-charged(size), gib),
					allocLine(p.path, 800*mib, cudaErrorOutOfMemory),
					"free 0 rc=0",
					infoLine(gib, gib),
					ok(600*mib))
			})
		}
	}
}

func TestMemoryReporting(t *testing.T) {
	a := buildAll(t)
	t.Run("per-device limits", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi,2Gi")
		r := a.run(t, e, "info", "info1", "total:0", "total:1", "total1:1", "nvml:0",
			"dev:1", "alloc:mem:512Mi", "info", "nvml:1")
		expectLines(t, r,
			infoLine(gib, gib),
			fmt.Sprintf("info1 rc=0 free=%d total=%d", gib, gib),
			fmt.Sprintf("total dev=0 rc=0 bytes=%d", gib),
			fmt.Sprintf("total dev=1 rc=0 bytes=%d", 2*gib),
			fmt.Sprintf("total1 dev=1 rc=0 bytes=%d", 2*gib),
			fmt.Sprintf("nvml dev=0 rc=0 total=%d free=%d used=0", gib, gib),
			fmt.Sprintf("nvml2 dev=0 rc=0 total=%d free=%d used=0", gib, gib),
			allocLine("mem", 512*mib, 0),
			infoLine(2*gib-512*mib, 2*gib),
			fmt.Sprintf("nvml dev=1 rc=0 total=%d free=%d used=%d", 2*gib, 2*gib-512*mib, 512*mib),
			fmt.Sprintf("nvml2 dev=1 rc=0 total=%d free=%d used=%d", 2*gib, 2*gib-512*mib, 512*mib))
	})
	t.Run("one value applies to every device", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=3Gi")
		r := a.run(t, e, "total:1")
		expectLines(t, r, fmt.Sprintf("total dev=1 rc=0 bytes=%d", 3*gib))
	})
	t.Run("no limit passes the device through", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_CONTAINER_ID")
		r := a.run(t, e, "info", "total:0", "nvml:0", "alloc:mem:60Gi", "alloc:mem:30Gi")
		expectLines(t, r,
			infoLine(fakeDeviceBytes, fakeDeviceBytes),
			fmt.Sprintf("total dev=0 rc=0 bytes=%d", fakeDeviceBytes),
			fmt.Sprintf("nvml dev=0 rc=0 total=%d free=%d used=0", fakeDeviceBytes, fakeDeviceBytes),
			fmt.Sprintf("nvml2 dev=0 rc=0 total=%d free=%d used=0", fakeDeviceBytes, fakeDeviceBytes),
			allocLine("mem", 60*gib, 0),
			allocLine("mem", 30*gib, cudaErrorOutOfMemory)) // the fake device is full
		if r.stderr != "" {
			t.Errorf("unexpected stderr: %s", r.stderr)
		}
	})
	t.Run("limit above the device is capped at the device", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=100Gi")
		r := a.run(t, e, "info", "alloc:mem:90Gi")
		expectLines(t, r, infoLine(fakeDeviceBytes, fakeDeviceBytes), allocLine("mem", 90*gib, cudaErrorOutOfMemory))
	})
}

// acctUsage reads the accounting file as the arbiter would (layout v1 in
// docs/enforcement.md) and returns pid -> bytes used on device 0.
func acctUsage(t *testing.T, path string) map[int32]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(b) < 256 || le.Uint32(b[0:]) != 0x43415354 || le.Uint16(b[4:]) != 1 {
		t.Fatalf("accounting file %s: bad header", path)
	}
	hdr, slot, n := int(le.Uint32(b[8:])), int(le.Uint32(b[12:])), int(le.Uint32(b[16:]))
	if hdr != 256 || slot != 144 || n != 512 || len(b) < hdr+slot*n {
		t.Fatalf("accounting file %s: header %d slot %d slots %d size %d", path, hdr, slot, n, len(b))
	}
	out := map[int32]uint64{}
	for i := 0; i < n; i++ {
		s := b[hdr+i*slot:]
		if pid := int32(le.Uint32(s[0:])); pid != 0 {
			out[pid] = le.Uint64(s[16:])
		}
	}
	return out
}

func TestLimitSpansProcessesAndSurvivesSIGKILL(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi")
	acct := filepath.Join(e["TESSERA_SHM_DIR"], "tessera-ctr-1.acct")

	holder := a.start(t, e, "alloc:mem:600Mi", "hold")
	if got := holder.next(t); got != allocLine("mem", 600*mib, 0) {
		t.Fatalf("holder: %q", got)
	}
	if got := holder.next(t); got != "holding" {
		t.Fatalf("holder: %q", got)
	}
	if got := acctUsage(t, acct)[int32(holder.cmd.Process.Pid)]; got != uint64(600*mib) {
		t.Fatalf("accounting file shows %d bytes for the holder, want %d", got, 600*mib)
	}

	// A second process sees the holder's usage and cannot exceed the sum.
	r := a.run(t, e, "info", "alloc:mem:600Mi", "alloc:mem:300Mi", "info")
	expectLines(t, r,
		infoLine(gib-600*mib, gib),
		allocLine("mem", 600*mib, cudaErrorOutOfMemory),
		allocLine("mem", 300*mib, 0),
		infoLine(gib-900*mib, gib))

	// That process exited normally: its slot is gone. Kill the holder with
	// SIGKILL (no destructor runs); the next allocator reclaims its slot.
	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := holder.exitCode(t); code != -1 {
		t.Fatalf("holder exit code %d, want -1 (killed)", code)
	}
	r = a.run(t, e, "alloc:mem:600Mi", "info")
	expectLines(t, r, allocLine("mem", 600*mib, 0), infoLine(gib-600*mib, gib))
	if left := acctUsage(t, acct); len(left) != 0 {
		t.Fatalf("accounting slots left after every process exited: %v", left)
	}
}

func TestConcurrentAllocatorsNeverOvershoot(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi")
	// Three processes of four threads each allocate 10Mi until refused and
	// then hold what they got: together they must end at exactly
	// floor(1Gi / 10Mi) allocations, no more (overshoot) and no fewer
	// (lost updates).
	var procs []*live
	for i := 0; i < 3; i++ {
		procs = append(procs, a.start(t, e, "race:4:10Mi", "hold"))
	}
	total := 0
	for _, p := range procs {
		var n int
		if _, err := fmt.Sscanf(p.next(t), "raced %d", &n); err != nil {
			t.Fatal(err)
		}
		if got := p.next(t); got != "holding" {
			t.Fatalf("got %q", got)
		}
		total += n
	}
	if want := int(gib / (10 * mib)); total != want {
		t.Fatalf("%d allocations of 10Mi succeeded across processes, want exactly %d", total, want)
	}
	for _, p := range procs {
		if code := p.exitCode(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
}

func TestUnusableAccountingDirFailsClosed(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi", "TESSERA_SHM_DIR="+filepath.Join(t.TempDir(), "missing"))
	r := a.run(t, e, "alloc:mem:1Mi", "launch:kernel:1")
	expectLines(t, r, allocLine("mem", mib, cudaErrorOutOfMemory), "launch kernel 1 rc=0")
	if !strings.Contains(r.stderr, "cannot open accounting file") {
		t.Fatalf("stderr: %q", r.stderr)
	}
}

func TestLockHolderDeathDoesNotWedgeTheContainer(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi")
	acct := filepath.Join(e["TESSERA_SHM_DIR"], "tessera-ctr-1.acct")
	expectLines(t, a.run(t, e, "alloc:mem:100Mi"), allocLine("mem", 100*mib, 0)) // creates the file
	r := a.run(t, e.with("LD_PRELOAD"), "lockdie:"+acct)
	if r.code != -1 || r.stdout != "locked rc=0\n" {
		t.Fatalf("lock holder: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The next process gets EOWNERDEAD, makes the lock consistent, goes on.
	expectLines(t, a.run(t, e, "alloc:mem:600Mi", "info"), allocLine("mem", 600*mib, 0), infoLine(gib-600*mib, gib))
}

func TestForkedChildKilledLeavesNoCharge(t *testing.T) {
	a := buildAll(t)
	e := a.base(t).with("TESSERA_MEMORY_LIMIT=1Gi")
	// The child (forked after the library loaded) allocates 600Mi and is
	// SIGKILLed; the parent allocates 600Mi while the child is a zombie.
	r := a.run(t, e, "forkkill:600Mi", "info")
	expectLines(t, r, "forkkill child=0 parent=0", infoLine(gib-600*mib, gib))
}

func TestOversubscription(t *testing.T) {
	a := buildAll(t)
	t.Run("device allocations become managed", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=100Gi", "TESSERA_OVERSUBSCRIBE=1")
		r := a.run(t, e, "alloc:mem:90Gi", "info", "alloc:mem:20Gi", "alloc:pitch:1Gi", "free:0", "stats")
		expectLines(t, r,
			allocLine("mem", 90*gib, 0), // more than the 80 GiB device: spills to host
			infoLine(10*gib, 100*gib),
			allocLine("mem", 20*gib, cudaErrorOutOfMemory), // the limit still holds
			allocLine("pitch", gib, 0)+" pitch=1536",
			"free 0 rc=0",
			"stats launches=0 managed=2 device=0")
	})
	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		e := a.base(t).with("TESSERA_MEMORY_LIMIT=100Gi")
		r := a.run(t, e, "alloc:mem:10Gi", "stats")
		expectLines(t, r, allocLine("mem", 10*gib, 0), "stats launches=0 managed=0 device=1")
	})
}

func TestBadEnvironmentFailsClosed(t *testing.T) {
	a := buildAll(t)
	cases := []struct {
		set  []string
		name string // the variable the error must name
	}{
		{[]string{"TESSERA_MEMORY_LIMIT=lots"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT="}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=0"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=-1Gi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=1.5Gi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=2Pi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=2000T"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=1Gi,,1Gi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=" + strings.Repeat("1Gi,", 16) + "1Gi"}, "TESSERA_MEMORY_LIMIT"},
		{[]string{"TESSERA_MEMORY_LIMIT=1Gi", "TESSERA_CONTAINER_ID=../etc"}, "TESSERA_CONTAINER_ID"},
		{[]string{"TESSERA_MEMORY_LIMIT=1Gi", "TESSERA_CONTAINER_ID"}, "TESSERA_CONTAINER_ID"},
		{[]string{"TESSERA_SHM_DIR=relative/dir"}, "TESSERA_SHM_DIR"},
		{[]string{"TESSERA_ARBITER_REGION=grant"}, "TESSERA_ARBITER_REGION"},
		{[]string{"TESSERA_OVERSUBSCRIBE=yes"}, "TESSERA_OVERSUBSCRIBE"},
		{[]string{"TESSERA_COMPUTE_FAIL=sometimes"}, "TESSERA_COMPUTE_FAIL"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.set, " "), func(t *testing.T) {
			t.Parallel()
			r := a.run(t, a.base(t).with(c.set...), "alloc:mem:1Mi", "launch:kernel:1", "info", "alloc:managed:1Mi")
			expectLines(t, r,
				allocLine("mem", mib, cudaErrorOutOfMemory),
				fmt.Sprintf("launch kernel 1 rc=%d", cudaErrorNotPermited),
				infoLine(0, fakeDeviceBytes),
				allocLine("managed", mib, cudaErrorOutOfMemory))
			errLines := splitLines(r.stderr)
			if len(errLines) != 1 || !strings.Contains(errLines[0], c.name) || !strings.Contains(errLines[0], "failing closed") {
				t.Fatalf("want one error line naming %s and saying it fails closed, got:\n%s", c.name, r.stderr)
			}
		})
	}
	t.Run("bad log level is reported but not enforced", func(t *testing.T) {
		t.Parallel()
		r := a.run(t, a.base(t).with("TESSERA_LOG_LEVEL=loud", "TESSERA_MEMORY_LIMIT=1Gi"), "alloc:mem:1Mi")
		expectLines(t, r, allocLine("mem", mib, 0))
		if !strings.Contains(r.stderr, "TESSERA_LOG_LEVEL") {
			t.Fatalf("stderr does not name TESSERA_LOG_LEVEL: %q", r.stderr)
		}
	})
}

// ---- entry-point resolution ----
