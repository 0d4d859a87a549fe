package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// Defects: a damaged jobs.db panicked `tessera up` with a stack trace,
// and an emptied one let it start over at job-1, overwriting the job
// folders. It now refuses with the file and what to do, exits non-zero,
// and `tessera up --recover` rebuilds the list and continues the IDs.
func TestUpRefusesDamagedStateThenRecovers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(db string) error
	}{
		{"truncated", func(db string) error { return os.Truncate(db, 10000) }},
		{"emptied", func(db string) error { return os.Truncate(db, 0) }},
		{"zeroed pages", func(db string) error {
			f, err := os.OpenFile(db, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(make([]byte, 4*os.Getpagesize()), 2*int64(os.Getpagesize()))
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := startUp(t, "1xH200")
			for i := 0; i < 2; i++ {
				if code, _, errs := tessera(append(append([]string{"run"}, d.host...), "--", "sh", "-c", "echo done")...); code != 0 {
					t.Fatalf("run: %d %s", code, errs)
				}
			}
			d.stop()
			db := filepath.Join(d.dir, "jobs.db")
			if err := tt.damage(db); err != nil {
				t.Fatal(err)
			}
			code, _, errs := tessera(append([]string{"up", "--simulate", "1xH200"}, d.host...)...)
			if code == 0 || !strings.Contains(errs, db) || !strings.Contains(errs, "tessera up --recover") {
				t.Errorf("up on a damaged database: exit %d, stderr %q; want an error naming %s and --recover", code, errs, db)
			}
			for _, bad := range []string{"panic", "goroutine "} {
				if strings.Contains(errs, bad) {
					t.Errorf("stderr has %q: %s", bad, errs)
				}
			}
			d.extra = []string{"--recover"}
			d.start()
			jobs := psJobs(t, d.host)
			if len(jobs) != 2 || jobs[0].State != api.Succeeded || jobs[1].State != api.Succeeded {
				t.Fatalf("jobs after recovery: %+v", jobs)
			}
			code, out, errs := tessera(append(append([]string{"run", "-d"}, d.host...), "--", "sh", "-c", "echo third")...)
			if code != 0 || strings.TrimSpace(out) != "job-3" {
				t.Errorf("next job after recovery: %d %q %q; want job-3 (IDs never reused)", code, out, errs)
			}
			kept, _ := filepath.Glob(db + ".damaged-*")
			if len(kept) != 1 {
				t.Errorf("damaged database kept aside: %v, want one file", kept)
			}
			if data, err := os.ReadFile(filepath.Join(d.dir, "jobs", "job-1", "stdout.log")); err != nil || string(data) != "done\n" {
				t.Errorf("job-1's log after recovery: %q, %v", data, err)
			}
		})
	}
}
