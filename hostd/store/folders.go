package store

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
	"github.com/tessera-gpu/tessera/internal/atomicfile"
	"github.com/tessera-gpu/tessera/internal/safefs"
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

// writeMirror writes a record mirror into the job folder rel (relative
// to stateDir) through a temporary name and a rename, never through a
// link (internal/safefs): a reader sees the old or the new record, never
// a part, and a failed write leaves no temporary file. It is not synced:
// the database is the durable copy.
func writeMirror(stateDir, rel string, data []byte) error {
	return safefs.ReplaceFile(stateDir, rel+"/"+RecordFile, data, 0o600)
}

// prepare checks the state folder (creating it owner-only when missing)
// and its jobs folder: both must be this user's own, writable by no one
// else, and reached through no link in the state folder (internal/safefs).
func prepare(stateDir string) error {
	if err := safefs.PrepareStateDir(stateDir, "state folder"); err != nil {
		return err
	}
	if err := safefs.MkdirAll(stateDir, JobsDir, 0o700); err != nil {
		return fmt.Errorf("state folder: %w", err)
	}
	return nil
}

// legacyMirrorTemp is the temporary name record mirrors were written
// through before they went through internal/atomicfile.
const legacyMirrorTemp = RecordFile + ".tmp"

// removeStaleTemps removes the temporary files a crash or a full disk
// left in job folders, and says so in the log: the record mirror's (only
// the daemon holding the database writes it), and the spec's and exit
// status's of jobs that are not running by their record (a running job's
// supervisor may be writing its exit status right now).
func removeStaleTemps(stateDir string, folders []folder, jobs map[string]api.Job, log *slog.Logger) {
	for _, f := range folders {
		ents, err := os.ReadDir(JobDir(stateDir, f.id))
		if err != nil {
			continue
		}
		running := jobs[f.id].State == api.Running
		for _, e := range ents {
			if !isStaleTemp(e.Name(), running) {
				continue
			}
			if err := safefs.Remove(stateDir, JobsDir+"/"+f.id+"/"+e.Name()); err != nil {
				log.Warn("remove a temporary file left in a job folder", "job", f.id, "file", e.Name(), "err", err)
				continue
			}
			log.Info("removed a temporary file left in a job folder (by a crash or a full disk)", "job", f.id, "file", e.Name())
		}
	}
}

// isStaleTemp reports whether name is a temporary file of a job folder's
// record or, unless its job is running, of its spec or exit status.
func isStaleTemp(name string, running bool) bool {
	if name == legacyMirrorTemp || atomicfile.IsTemp(name, RecordFile) {
		return true
	}
	return !running && (atomicfile.IsTemp(name, supervisor.SpecFile) || atomicfile.IsTemp(name, supervisor.ExitFile))
}

// openBolt opens the database file at path, a regular file reached
// through no link: it is checked before, and compared after, bbolt opens
// it by name.
func openBolt(path string, opts *bolt.Options) (*bolt.DB, error) {
	before, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case !before.Mode().IsRegular():
		return nil, notRegular(before)
	}
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		return nil, err
	}
	after, err := os.Lstat(path)
	if err == nil && (!after.Mode().IsRegular() || (before != nil && !os.SameFile(before, after))) {
		err = errors.New("it was replaced while being opened: tessera opens nothing in its state folder through a link")
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// notRegular says what is wrong with a database that is not a plain file.
func notRegular(fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("it is a symbolic link, and tessera opens nothing in its state folder through a link; remove the link (and put the database itself there)")
	}
	return fmt.Errorf("must be a regular file, got mode %s", fi.Mode())
}
