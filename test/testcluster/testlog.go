package testcluster

import (
	"strings"
	"testing"
	"time"
)

// LogWriter sends what is written to it (a log handler's lines) to the
// test log, shown on failure or with -v.
type LogWriter struct{ T testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Eventually polls check every 200 ms until it returns nil, and fails the
// test with check's last error after bound: a liveness guard against a
// hang, not a performance target.
func Eventually(t testing.TB, what string, bound time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
