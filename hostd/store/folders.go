package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

type folder struct {
	id  string
	seq uint64
}

// jobFolders lists the job folders of stateDir ("job-N"), by N.
func jobFolders(stateDir string) ([]folder, error) {
	ents, err := os.ReadDir(filepath.Join(stateDir, JobsDir))
	if err != nil {
		return nil, fmt.Errorf("list job folders: %w", err)
	}
	var out []folder
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "job-")
		if !e.IsDir() || !ok {
			continue
		}
		seq, err := strconv.ParseUint(n, 10, 64)
		if err != nil || seq == 0 || strconv.FormatUint(seq, 10) != n {
			continue
		}
		out = append(out, folder{id: e.Name(), seq: seq})
	}
	slices.SortFunc(out, func(a, b folder) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return out, nil
}

// writeAtomic writes data to path through a temporary file and a rename,
// so a reader sees the old or the new content, never a part; with sync
// the data is on disk before the rename.
func writeAtomic(path string, data []byte, sync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if sync {
		if err := tmp.Sync(); err != nil {
			_ = tmp.Close()
			return fmt.Errorf("sync %s: %w", path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}
