package server

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/supervisor"
)

// logPoll is how often a followed log is re-read for new output.
const logPoll = 50 * time.Millisecond

// logs streams a job's stdout or stderr (?stream=stdout|stderr). With
// ?follow=true it keeps streaming until the job has ended and all its
// output has been sent.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	j, err := s.d.Job(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	// Output may hold what the environment held: the owner's only.
	if who := callerOf(r.Context()); !s.mayManage(who, j) {
		s.forbidden(w, who, j, "read the output of")
		return
	}
	name := supervisor.StdoutFile
	switch r.URL.Query().Get("stream") {
	case "", "stdout":
	case "stderr":
		name = supervisor.StderrFile
	default:
		writeJSON(w, http.StatusBadRequest, api.Error{Error: "stream: must be stdout or stderr", Field: "stream"})
		return
	}
	follow := r.URL.Query().Get("follow") == "true"
	var off int64
	if v := r.URL.Query().Get("offset"); v != "" {
		if off, err = strconv.ParseInt(v, 10, 64); err != nil || off < 0 {
			writeJSON(w, http.StatusBadRequest, api.Error{Error: "offset: must be a whole number of bytes >= 0", Field: "offset"})
			return
		}
	}
	path := filepath.Join(s.d.JobDir(id), name)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Trailer", api.LogCompleteTrailer)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	t := time.NewTicker(logPoll)
	defer t.Stop()
	for {
		// Read the state first: output written before the job ended is
		// in the file by the time the state says it ended.
		final := j.State.Final()
		n, err := copyFrom(w, path, off)
		off += n
		if err != nil {
			s.log.Warn("stream log", "job", id, "err", err)
			return
		}
		if flusher != nil && n > 0 {
			flusher.Flush()
		}
		if !follow || final {
			// Tells the client the stream ended by design, not because
			// the daemon went away.
			w.Header().Set(api.LogCompleteTrailer, "true")
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		if j, err = s.d.Job(id); err != nil {
			return
		}
	}
}

func copyFrom(w io.Writer, path string, off int64) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.Copy(w, f)
}
