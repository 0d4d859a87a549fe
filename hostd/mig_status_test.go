package hostd

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tessera-gpu/tessera/catalog"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/migctl"
	"github.com/tessera-gpu/tessera/migctl/migsim"
)

// countingMIG counts the layout reads of a manager.
type countingMIG struct {
	*migctl.Manager
	layouts atomic.Int32
}

func (c *countingMIG) Layout() (map[string][]migctl.Placed, error) {
	c.layouts.Add(1)
	return c.Manager.Layout()
}

// migStatus describes GPU gi's instances in Status (what tessera ps
// --gpus reads): "profile@start" with "*job" when in use, in order.
func migStatus(t *testing.T, d *testDaemon, gi int) (string, []api.MIGInstanceStatus) {
	t.Helper()
	st, err := d.Status()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range st.GPUs[gi].MIG {
		s := fmt.Sprintf("%s@%d", in.Profile, in.Start)
		if in.InUse {
			s += "*" + in.Job
		}
		out = append(out, s)
	}
	return strings.Join(out, " "), st.GPUs[gi].MIG
}

// On a GPU whose layout the daemon manages through the driver, Status
// lists the instance created for a job, with the driver's UUID, in use by
// that job, while it runs, and not after it ended (destroyed); the
// operator's instance is listed free throughout. Two jobs started
// together are read back from the driver once.
func TestMIGManagedStatusShowsInstances(t *testing.T) {
	h := newManagedHost(t)
	op, err := migctl.Create(h.gpu, h.spec, "1g.10gb", 6) // the operator's
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := migctl.Open(&migsim.Lib{GPUs: []*migsim.GPU{h.gpu}}, map[string]*catalog.MIGSpec{h.gpu.UUID(): h.spec})
	if err != nil {
		t.Fatal(err)
	}
	mig := &countingMIG{Manager: migctl.NewManager(gpus)}
	nodes := h.discovered()
	d := startDaemon(t, t.TempDir(), "1xL4", func(c *Config) { c.Nodes, c.MIG, c.Simulated = nodes, mig, false })
	if got, _ := migStatus(t, d, 0); got != "1g.10gb@6" {
		t.Fatalf("status before any job %q, want the operator's instance free", got)
	}
	gates := t.TempDir()
	a := submit(t, d, migJob(gates, "3g.40gb")).ID
	b := submit(t, d, migJob(gates, "1g.20gb")).ID
	eventually(t, "both run", func() bool { return started(t, d, a) && started(t, d, b) })
	sa, sb := job(t, d, a).Shares[0], job(t, d, b).Shares[0]
	lists := func() int { return int(mig.layouts.Load()) }
	before := lists()
	got, ins := migStatus(t, d, 0)
	want := map[int]string{sa.MIG.Start: "3g.40gb@" + fmt.Sprint(sa.MIG.Start) + "*" + a, sb.MIG.Start: "1g.20gb@" + fmt.Sprint(sb.MIG.Start) + "*" + b, 6: "1g.10gb@6"}
	if len(ins) != 3 {
		t.Fatalf("status %q, want the two jobs' instances and the operator's", got)
	}
	for _, in := range ins {
		s := fmt.Sprintf("%s@%d", in.Profile, in.Start)
		if in.InUse {
			s += "*" + in.Job
		}
		if want[in.Start] != s {
			t.Errorf("instance at %d: %q, want %q (status %q)", in.Start, s, want[in.Start], got)
		}
		if uuid := map[int]string{sa.MIG.Start: sa.UUID, sb.MIG.Start: sb.UUID, 6: op.UUID}[in.Start]; in.UUID != uuid {
			t.Errorf("instance at %d: UUID %q, want %q", in.Start, in.UUID, uuid)
		}
	}
	if n := lists() - before; n != 1 {
		t.Errorf("status after two creations read the layout from the driver %d times, want once", n)
	}
	before = lists()
	migStatus(t, d, 0)
	if n := lists() - before; n != 0 {
		t.Errorf("status with no change since read the driver again (%d listings)", n)
	}
	drain(t, d, gates)
	if got, _ := migStatus(t, d, 0); got != "1g.10gb@6" {
		t.Errorf("status after every job ended %q, want the operator's instance only", got)
	}
}

// On a simulated host (no driver) Status lists the engine's instances: a
// configured one taken by a job in use by it, one created for a job named
// as the job's share names it, and neither in use once the jobs ended
// (the created one gone).
func TestMIGSimulatedStatusShowsInstances(t *testing.T) {
	d := startMIGDaemon(t, `nodes: [{name: a, gpus: 1xH100-SXM, overrides: [{index: 0, migManaged: true, migInstances: [1g.10gb@0]}]}]`)
	gates := t.TempDir()
	a := submit(t, d, migJob(gates, "1g.10gb")).ID
	eventually(t, "1g.10gb runs", func() bool { return started(t, d, a) })
	b := submit(t, d, migJob(gates, "3g.40gb")).ID
	eventually(t, "3g.40gb runs", func() bool { return started(t, d, b) })
	sa, sb := job(t, d, a).Shares[0], job(t, d, b).Shares[0]
	if sa.MIG == nil || sa.MIG.Create || sb.MIG == nil || !sb.MIG.Create {
		t.Fatalf("shares %+v, %+v: want the configured instance taken and a created one", sa, sb)
	}
	got, ins := migStatus(t, d, 0)
	if want := fmt.Sprintf("1g.10gb@0*%s 3g.40gb@%d*%s", a, sb.MIG.Start, b); got != want {
		t.Fatalf("status %q, want %q", got, want)
	}
	if ins[0].UUID != sa.UUID || ins[1].UUID != sb.UUID || ins[0].UUID == ins[1].UUID || ins[1].MemoryMiB <= 0 {
		t.Errorf("instances %+v, want UUIDs %s and %s with memory", ins, sa.UUID, sb.UUID)
	}
	drain(t, d, gates)
	if got, _ := migStatus(t, d, 0); got != "1g.10gb@0" {
		t.Errorf("status after the jobs ended %q, want the configured instance free", got)
	}
}
