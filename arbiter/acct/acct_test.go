package acct

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/arbiter/internal/ctest"
)

// file builds an accounting file; slots maps slot index -> pid, bytes per device.
func file(t *testing.T, edit func([]byte), slots map[int]struct {
	pid  int32
	used []uint64
}) string {
	t.Helper()
	b := make([]byte, FileSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], Magic)
	le.PutUint16(b[4:], 1)
	le.PutUint32(b[8:], HeaderSize)
	le.PutUint32(b[12:], SlotSize)
	le.PutUint32(b[16:], Slots)
	le.PutUint32(b[20:], Devices)
	for i, s := range slots {
		o := HeaderSize + i*SlotSize
		le.PutUint32(b[o:], uint32(s.pid))
		for d, n := range s.used {
			le.PutUint64(b[o+16+8*d:], n)
		}
	}
	if edit != nil {
		edit(b)
	}
	path := filepath.Join(t.TempDir(), "tessera-x.acct")
	if err := os.WriteFile(path, b, 0o666); err != nil {
		t.Fatal(err)
	}
	return path
}

type slot = struct {
	pid  int32
	used []uint64
}

func TestRead(t *testing.T) {
	path := file(t, nil, map[int]slot{
		0:   {100, []uint64{10, 1}},
		7:   {0, []uint64{999}}, // free slot: ignored
		511: {200, []uint64{5, 0, 3}},
	})
	u, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if u.Processes != 2 || u.Bytes[0] != 15 || u.Bytes[1] != 1 || u.Bytes[2] != 3 {
		t.Fatalf("usage %+v", u)
	}
}

func TestReadRejectsOtherLayouts(t *testing.T) {
	cases := []struct {
		name string
		edit func([]byte)
		want string
	}{
		{"unpublished", func(b []byte) { b[0] = 0 }, "magic"},
		{"other major", func(b []byte) { b[4] = 2 }, "version_major: want 1, got 2"},
		{"other geometry", func(b []byte) { b[16] = 1 }, "geometry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(file(t, c.edit, nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	if _, err := Read(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want os.ErrNotExist", err)
	}
	short := filepath.Join(t.TempDir(), "short")
	os.WriteFile(short, make([]byte, 100), 0o666)
	if _, err := Read(short); err == nil || !strings.Contains(err.Error(), "size 100") {
		t.Fatalf("short file: err = %v", err)
	}
}

// TestReadsTheLibrarysFile has the real library allocate through the fake
// driver and reads its accounting file while the process holds the memory.
func TestReadsTheLibrarysFile(t *testing.T) {
	if !ctest.HaveGCC() {
		t.Skip("gcc not found: the interception library is C")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := ctest.Compile(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	shm := t.TempDir()
	cmd := exec.CommandContext(ctx, b.Tprog, "alloc:mem:3Mi", "alloc:mem:1Mi", "hold")
	cmd.Env = b.Env(shm, "ctr-9", "TESSERA_MEMORY_LIMIT=1Gi")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "holding" {
	}
	u, err := Read(Path(shm, "ctr-9"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Processes != 1 || u.Bytes[0] != 4<<20 {
		t.Fatalf("while holding: %+v, want one process with 4 MiB on device 0", u)
	}
	stdin.Close()
	for lines.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if u, err = Read(Path(shm, "ctr-9")); err != nil || u.Processes != 0 || u.Bytes[0] != 0 {
		t.Fatalf("after exit: %+v, %v; want no process, no bytes", u, err)
	}
}

// The accounting folder is the workload's to write: Read follows no link
// (to a file of the arbiter's choosing) and does not hang on a FIFO.
func TestReadRefusesLinksAndFIFOs(t *testing.T) {
	real := file(t, nil, map[int]slot{0: {100, []uint64{10}}})
	dir := t.TempDir()
	link := filepath.Join(dir, "tessera-link.acct")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(link); err == nil {
		t.Error("Read followed a symbolic link")
	}
	fifo := filepath.Join(dir, "tessera-fifo.acct")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Read(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "must be a regular file") {
			t.Errorf("Read of a FIFO: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Read of a FIFO blocked (the bound only ends a hang)")
	}
}
