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

// writeMirror writes a record mirror through its own temporary name and a
// rename (the caller serializes writes of one mirror): a reader sees the
// old or the new record, never a part. It is not synced: the database is
// the durable copy.
func writeMirror(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
