package grant

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/tessera-gpu/tessera/arbiter/internal/ctest"
)

// header reads intercept/src/shm_layout.h.
func header(t *testing.T) string {
	t.Helper()
	dir, err := ctest.InterceptDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "src", "shm_layout.h"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// structOffsets returns field -> offset from the "/* OFF: ..." comments
// of a struct in shm_layout.h.
func structOffsets(t *testing.T, src, name string) map[string]int {
	t.Helper()
	body := regexp.MustCompile(`(?s)struct ` + name + ` \{(.*?)\n\};`).FindStringSubmatch(src)
	if body == nil {
		t.Fatalf("struct %s not found in shm_layout.h", name)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`(\w+)(?:\[\w+\])?;\s*/\*\s*(\d+):?`).FindAllStringSubmatch(body[1], -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}

func define(t *testing.T, src, name string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`#define ` + name + `\s+(0x[0-9a-fA-F]+|\d+)u?`).FindStringSubmatch(src)
	if m == nil {
		t.Fatalf("#define %s not found in shm_layout.h", name)
	}
	n, err := strconv.ParseUint(m[1], 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLayoutMatchesTheLibrary(t *testing.T) {
	src := header(t)
	consts := []struct {
		name string
		got  uint64
	}{
		{"TESSERA_GRANT_MAGIC", uint64(Magic)},
		{"TESSERA_GRANT_VERSION_MAJOR", uint64(VersionMajor)},
		{"TESSERA_GRANT_DEFAULT_STALE_MS", DefaultStaleAfterMs},
		{"TESSERA_MAX_DEV", MaxDevices},
	}
	for _, c := range consts {
		if want := define(t, src, c.name); c.got != want {
			t.Errorf("%s = %d here, %d in shm_layout.h", c.name, c.got, want)
		}
	}
	fields := []struct {
		strct, field string
		got          int
	}{
		{"tessera_grant_header", "magic", offMagic},
		{"tessera_grant_header", "version_major", offVersionMajor},
		{"tessera_grant_header", "version_minor", offVersionMinor},
		{"tessera_grant_header", "header_size", offHeaderSize},
		{"tessera_grant_header", "record_size", offRecordSize},
		{"tessera_grant_header", "ndev", offNdev},
		{"tessera_grant_header", "stale_after_ms", offStaleAfterMs},
		{"tessera_grant_header", "heartbeat_ns", offHeartbeat},
		{"tessera_grant_header", "arbiter_epoch", offEpoch},
		{"tessera_grant_header", "reserved", 40},
		{"tessera_grant_record", "tokens", offTokens},
		{"tessera_grant_record", "waiters", offWaiters},
		{"tessera_grant_record", "waits", offWaits},
		{"tessera_grant_record", "ungated", offUngated},
		{"tessera_grant_record", "reserved", 32},
	}
	for _, f := range fields {
		offs := structOffsets(t, src, f.strct)
		want, ok := offs[f.field]
		if !ok {
			t.Errorf("%s.%s not found in shm_layout.h (have %v)", f.strct, f.field, offs)
			continue
		}
		if f.got != want {
			t.Errorf("%s.%s at %d here, %d in shm_layout.h", f.strct, f.field, f.got, want)
		}
	}
	for _, s := range []string{`sizeof\(struct tessera_grant_header\) == (\d+)`, `sizeof\(struct tessera_grant_record\) == (\d+)`} {
		m := regexp.MustCompile(s).FindStringSubmatch(src)
		if m == nil || m[1] != "64" {
			t.Errorf("shm_layout.h: %s: got %v, want 64 (HeaderSize and RecordSize)", s, m)
		}
	}
}
