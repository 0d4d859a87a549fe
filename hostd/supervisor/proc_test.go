package supervisor

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		start  uint64
		zombie bool
		err    bool
	}{
		{"plain", "42 (sleep) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 10", 123456, false, false},
		{"name with spaces and parens", "42 (a b) (c)) Z 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 99 1000 10", 99, true, false},
		{"truncated", "42 (x) S 1 2", 0, false, true},
		{"garbage", "nothing", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, zombie, ok, err := parseStat(tt.line)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if err == nil && (!ok || start != tt.start || zombie != tt.zombie) {
				t.Errorf("got start %d zombie %v ok %v", start, zombie, ok)
			}
		})
	}
}

func TestAliveSelf(t *testing.T) {
	start, _, ok, err := ProcStart(os.Getpid())
	if err != nil || !ok {
		t.Fatalf("ProcStart(self) = %v, %v", ok, err)
	}
	tests := []struct {
		name  string
		pid   int
		start uint64
		want  bool
	}{
		{"self", os.Getpid(), start, true},
		{"pid reused", os.Getpid(), start + 1, false},
		{"no pid", 0, 0, false},
	}
	for _, tt := range tests {
		if got, err := Alive(tt.pid, tt.start); err != nil || got != tt.want {
			t.Errorf("%s: Alive = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}
