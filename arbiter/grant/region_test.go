package grant

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCreateWritesTheV1LayoutByteForByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grant")
	r, err := Create(path, Options{Devices: 2, StaleAfter: 1500 * time.Millisecond, Epoch: 77,
		Tokens: []int64{5, -3}, Heartbeat: 123456789})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 64+2*64)
	le := binary.LittleEndian
	le.PutUint32(want[0:], 0x52475354)
	le.PutUint16(want[4:], 1)
	le.PutUint16(want[6:], 0)
	le.PutUint32(want[8:], 64)
	le.PutUint32(want[12:], 64)
	le.PutUint32(want[16:], 2)
	le.PutUint32(want[20:], 1500)
	le.PutUint64(want[24:], 123456789)
	le.PutUint64(want[32:], 77)
	le.PutUint64(want[64:], 5)
	le.PutUint64(want[128:], uint64(1<<64-3)) // -3
	if !bytes.Equal(got, want) {
		t.Fatalf("file:\n% x\nwant:\n% x", got, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o666 {
		t.Fatalf("mode %v, want 0666", st.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".grant.tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestCreateRejectsBadOptions(t *testing.T) {
	ok := Options{Devices: 1, StaleAfter: time.Second, Heartbeat: 1}
	cases := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no devices", func(o *Options) { o.Devices = 0 }, "devices: must be in [1, 16], got 0"},
		{"too many devices", func(o *Options) { o.Devices = 17 }, "devices: must be in [1, 16], got 17"},
		{"sub-millisecond stale", func(o *Options) { o.StaleAfter = time.Microsecond }, "staleAfter: must be whole milliseconds in [1ms, 1h]"},
		{"too many tokens", func(o *Options) { o.Tokens = []int64{1, 2} }, "tokens: at most one per device (1), got 2"},
		{"unbeaten", func(o *Options) { o.Heartbeat = 0 }, "heartbeat: must be > 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ok
			c.edit(&o)
			_, err := Create(filepath.Join(t.TempDir(), "grant"), o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	if _, err := Create(filepath.Join(t.TempDir(), "absent", "grant"), ok); err == nil {
		t.Fatal("no error for a missing folder")
	}
}

func TestCreateReplacesAnOldRegionWithANewFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grant")
	o := Options{Devices: 1, StaleAfter: time.Second, Heartbeat: 1}
	old, err := Create(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	st1, _ := os.Stat(path)
	fresh, err := Create(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	st2, _ := os.Stat(path)
	if os.SameFile(st1, st2) {
		t.Fatal("restart must publish a new inode (the library reattaches by inode)")
	}
}

// TestTokensAreNeverLost races library-style takes (fetch-sub, undo on
// failure) against the arbiter's adds and revocations: every token is
// either taken, revoked or still in the record.
func TestTokensAreNeverLost(t *testing.T) {
	r, err := Create(filepath.Join(t.TempDir(), "grant"), Options{Devices: 1, StaleAfter: time.Second, Heartbeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const adds, per = 2000, 7
	var taken [4]int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range taken {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if r.Add(0, -1) >= 0 {
					taken[w]++
				} else {
					r.Add(0, 1)
				}
			}
		}()
	}
	var revoked int64
	for i := 0; i < adds; i++ {
		r.Add(0, per)
		if i%10 == 0 {
			_, n := r.LowerTo(0, 3)
			revoked += n
		}
	}
	close(stop)
	wg.Wait()
	sum := r.Read(0).Tokens + revoked
	for _, n := range taken {
		sum += n
	}
	if sum != adds*per {
		t.Fatalf("taken+revoked+left = %d, granted %d", sum, adds*per)
	}
}
