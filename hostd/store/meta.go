package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's file header: pages 0 and 1 each hold a meta record after a
// 16-byte page header (id u64, flags u16, count u16, overflow u32):
// magic u32, version u32, pageSize u32, flags u32, root bucket (pgid u64,
// sequence u64), freelist pgid u64, high-water pgid u64, txid u64, and an
// FNV-64a checksum of the 56 bytes before it (go.etcd.io/bbolt
// internal/common/meta.go). bbolt itself falls back silently to the other
// meta page when one is bad, which turns a damaged header into an older
// database; Open refuses it instead.
const (
	pageHeaderSize = 16
	metaSumOffset  = 56
	metaSize       = metaSumOffset + 8
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
)

type meta struct {
	pageSize uint32
	pgid     uint64 // pages in use (high-water mark)
	txid     uint64
}

func parseMeta(b []byte) (meta, error) {
	if len(b) < pageHeaderSize+metaSize {
		return meta{}, errors.New("short page")
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return meta{}, errors.New("bad magic number")
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return meta{}, fmt.Errorf("unknown version %d", v)
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:metaSumOffset])
	if h.Sum64() != le.Uint64(m[metaSumOffset:]) {
		return meta{}, errors.New("checksum mismatch")
	}
	return meta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// checkMeta verifies both header pages of the database at path (size
// bytes): each must carry a valid checksum, and the file must hold every
// page the newer one says is in use.
func checkMeta(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	first := make([]byte, pageHeaderSize+metaSize)
	if _, err := io.ReadFull(f, first); err != nil {
		return fmt.Errorf("header page 0: %v (file of %d bytes)", err, size)
	}
	m0, err0 := parseMeta(first)
	pageSize := int64(os.Getpagesize())
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	second := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(second, pageSize); err != nil {
		return fmt.Errorf("header page 1: %v (file of %d bytes)", err, size)
	}
	m1, err1 := parseMeta(second)
	switch {
	case err0 != nil:
		return fmt.Errorf("header page 0 is damaged (%v)", err0)
	case err1 != nil:
		return fmt.Errorf("header page 1 is damaged (%v)", err1)
	case m0.pageSize != m1.pageSize:
		return fmt.Errorf("header pages disagree on the page size (%d, %d)", m0.pageSize, m1.pageSize)
	}
	newest := m0
	if m1.txid > m0.txid {
		newest = m1
	}
	if need := int64(newest.pgid) * pageSize; size < need {
		return fmt.Errorf("truncated: %d bytes, its header says %d pages of %d bytes (%d bytes)", size, newest.pgid, pageSize, need)
	}
	return nil
}
