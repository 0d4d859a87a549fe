package acct

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Layout 1.0 of the accounting file (intercept/src/shm_layout.h).
const (
	Magic        uint32 = 0x43415354 // "TSAC"
	VersionMajor uint16 = 1
	HeaderSize          = 256
	SlotSize            = 144
	Slots               = 512
	Devices             = 16
	FileSize            = HeaderSize + Slots*SlotSize

	offSlotPid  = 0
	offSlotUsed = 16
)

// Path is the accounting file of container id in dir.
func Path(dir, id string) string { return filepath.Join(dir, "tessera-"+id+".acct") }

// Usage is a container's memory use.
type Usage struct {
	// Bytes is the sum over live processes, per device ordinal.
	Bytes [Devices]uint64
	// Processes is the number of live slots.
	Processes int
}

// Read sums the live slots of the file at path. A missing file is an
// error wrapping os.ErrNotExist (the container has not allocated yet).
// The folder is the workload's to write, so a link or anything but a
// regular file there is refused, and opening never blocks (a FIFO).
func Read(path string) (Usage, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Usage{}, fmt.Errorf("accounting file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Usage{}, fmt.Errorf("accounting file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Usage{}, fmt.Errorf("accounting file %s: must be a regular file, got mode %s", path, st.Mode())
	}
	if st.Size() < FileSize {
		return Usage{}, fmt.Errorf("accounting file %s: size %d, want at least %d", path, st.Size(), FileSize)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, FileSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return Usage{}, fmt.Errorf("accounting file %s: mmap: %w", path, err)
	}
	defer syscall.Munmap(mem)
	if err := checkHeader(mem); err != nil {
		return Usage{}, fmt.Errorf("accounting file %s: %w", path, err)
	}
	var u Usage
	for i := range Slots {
		slot := HeaderSize + i*SlotSize
		if atomic.LoadInt32((*int32)(unsafe.Pointer(&mem[slot+offSlotPid]))) == 0 {
			continue
		}
		u.Processes++
		for d := range Devices {
			u.Bytes[d] += atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[slot+offSlotUsed+8*d])))
		}
	}
	return u, nil
}

func checkHeader(mem []byte) error {
	le := binary.LittleEndian
	magic := atomic.LoadUint32((*uint32)(unsafe.Pointer(&mem[0])))
	switch {
	case magic != Magic:
		return fmt.Errorf("magic: want %#x, got %#x (not yet published, or not an accounting file)", Magic, magic)
	case le.Uint16(mem[4:]) != VersionMajor:
		return fmt.Errorf("version_major: want %d, got %d", VersionMajor, le.Uint16(mem[4:]))
	case le.Uint32(mem[8:]) != HeaderSize || le.Uint32(mem[12:]) != SlotSize ||
		le.Uint32(mem[16:]) != Slots || le.Uint32(mem[20:]) != Devices:
		return fmt.Errorf("geometry: want header %d, slot %d, %d slots, %d devices; got %d, %d, %d, %d",
			HeaderSize, SlotSize, Slots, Devices, le.Uint32(mem[8:]), le.Uint32(mem[12:]), le.Uint32(mem[16:]), le.Uint32(mem[20:]))
	}
	return nil
}
