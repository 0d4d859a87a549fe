package nvmlmeter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeProc is a fake proc file system in a temporary folder.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) fakeProc { return fakeProc{t: t, root: t.TempDir()} }

func (p fakeProc) write(pid uint32, name, content string) {
	p.t.Helper()
	dir := filepath.Join(p.root, strconv.FormatUint(uint64(pid), 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// container puts pid in a systemd/containerd cgroup v2 container.
func (p fakeProc) container(pid uint32, podUID, id string) {
	p.write(pid, "cgroup", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+
		strings.ReplaceAll(podUID, "-", "_")+".slice/cri-containerd-"+id+".scope\n")
}

// proc writes pid's stat line with parent ppid.
func (p fakeProc) proc(pid, ppid uint32, comm string) {
	p.write(pid, "stat", fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 10 18446744073709551615\n", pid, comm, ppid, pid, pid))
}

func TestCgroupResolver(t *testing.T) {
	p := newFakeProc(t)
	other := strings.Repeat("ab", 32)
	p.container(10, uid, ctrID)
	p.container(11, uid, other)
	p.write(12, "cgroup", "0::/user.slice/user-1000.slice/session-3.scope\n")
	// A cgroup file that cannot be read: a folder in its place.
	if err := os.MkdirAll(filepath.Join(p.root, "13", "cgroup"), 0o755); err != nil {
		t.Fatal(err)
	}
	var asked []Container
	r := Cgroup{ProcRoot: p.root, Lookup: func(c Container) (string, bool) {
		asked = append(asked, c)
		if c.ID == ctrID {
			return "tsr-a", true
		}
		return "", false
	}}
	cases := []struct {
		pid     uint32
		key     string
		ok, err bool
	}{
		{pid: 10, key: "tsr-a", ok: true},
		{pid: 11},            // a container without a client
		{pid: 12},            // a host process
		{pid: 99},            // gone
		{pid: 13, err: true}, // unreadable
	}
	for _, c := range cases {
		key, ok, err := r.Resolve(context.Background(), c.pid)
		if key != c.key || ok != c.ok || (err != nil) != c.err {
			t.Errorf("pid %d: got %q %v %v, want %q %v err=%v", c.pid, key, ok, err, c.key, c.ok, c.err)
		}
	}
	want := []Container{{PodUID: uid, ID: ctrID, Runtime: "containerd"}, {PodUID: uid, ID: other, Runtime: "containerd"}}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("lookups = %+v, want %+v", asked, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := r.Resolve(ctx, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestEnvironResolver(t *testing.T) {
	p := newFakeProc(t)
	p.write(20, "environ", "PATH=/usr/bin\x00TESSERA_CONTAINER_ID=tsr-b\x00HOME=/root\x00")
	p.write(21, "environ", "PATH=/usr/bin\x00TESSERA_CONTAINER_ID_X=no\x00")
	p.write(22, "environ", "TESSERA_CONTAINER_ID=\x00")
	p.write(23, "environ", "") // a zombie
	r := Environ{ProcRoot: p.root}
	for pid, want := range map[uint32]string{20: "tsr-b", 21: "", 22: "", 23: "", 24: ""} {
		key, ok, err := r.Resolve(context.Background(), pid)
		if err != nil || key != want || ok != (want != "") {
			t.Errorf("pid %d: got %q %v %v, want %q", pid, key, ok, err, want)
		}
	}
}

func TestProcTreeResolver(t *testing.T) {
	p := newFakeProc(t)
	// Job j1: supervisor 100 → shell 200 → python 300 (a name with
	// spaces and parentheses) → worker 301. Job j2: supervisor 110 → 210.
	p.proc(100, 1, "tessera")
	p.proc(200, 100, "sh")
	p.proc(300, 200, "python (train) x")
	p.proc(301, 300, "pt_data_worker")
	p.proc(110, 1, "tessera")
	p.proc(210, 110, "vllm")
	p.proc(400, 1, "Xorg")
	p.proc(500, 501, "loop")
	p.proc(501, 500, "loop")
	p.write(600, "stat", "600 (broken")
	calls := 0
	r := ProcTree{ProcRoot: p.root, Roots: func(context.Context) (map[int]string, error) {
		calls++
		return map[int]string{100: "j1", 110: "j2"}, nil
	}}
	cases := []struct {
		pid uint32
		key string
		err bool
	}{
		{pid: 100, key: "j1"}, {pid: 200, key: "j1"}, {pid: 301, key: "j1"}, {pid: 210, key: "j2"},
		{pid: 400}, {pid: 500}, {pid: 1}, {pid: 999}, {pid: 600, err: true},
	}
	for _, c := range cases {
		key, ok, err := r.Resolve(context.Background(), c.pid)
		if key != c.key || ok != (c.key != "") || (err != nil) != c.err {
			t.Errorf("pid %d: got %q %v %v, want %q err=%v", c.pid, key, ok, err, c.key, c.err)
		}
	}
	if calls != len(cases) {
		t.Errorf("roots asked %d times, want once per Resolve (%d)", calls, len(cases))
	}
	broken := ProcTree{ProcRoot: p.root, Roots: func(context.Context) (map[int]string, error) { return nil, errors.New("store closed") }}
	if _, _, err := broken.Resolve(context.Background(), 200); err == nil || !strings.Contains(err.Error(), "store closed") {
		t.Errorf("roots error: %v", err)
	}
	if _, ok, err := (ProcTree{ProcRoot: p.root}).Resolve(context.Background(), 200); ok || err != nil {
		t.Errorf("no roots: %v %v", ok, err)
	}
}

// resolverFunc adapts a function to Resolver.
type resolverFunc func(uint32) (string, bool, error)

func (f resolverFunc) Resolve(_ context.Context, pid uint32) (string, bool, error) { return f(pid) }

func TestFirst(t *testing.T) {
	failing := resolverFunc(func(uint32) (string, bool, error) { return "", false, errors.New("permission denied") })
	none := resolverFunc(func(uint32) (string, bool, error) { return "", false, nil })
	byPID := resolverFunc(func(pid uint32) (string, bool, error) { return "k" + strconv.Itoa(int(pid)), pid < 10, nil })
	if key, ok, err := (First{failing, none, byPID}).Resolve(context.Background(), 3); key != "k3" || !ok || err != nil {
		t.Errorf("later resolver: %q %v %v", key, ok, err)
	}
	if key, ok, err := (First{byPID, failing}).Resolve(context.Background(), 4); key != "k4" || !ok || err != nil {
		t.Errorf("first resolver: %q %v %v", key, ok, err)
	}
	if _, ok, err := (First{failing, byPID}).Resolve(context.Background(), 40); ok || err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("nobody: %v %v", ok, err)
	}
	if _, ok, err := (First{none, byPID}).Resolve(context.Background(), 40); ok || err != nil {
		t.Errorf("nobody, no error: %v %v", ok, err)
	}
}
