package hostd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// MIG requests on a simulated H200 are placed through the engine as their
// equivalent share: seven 1g.18gb instances fit one GPU, the eighth waits.
// Each job sees its own instance (MIG-<GPU UUID>/<n>), its profile and its
// parent GPU.
func TestMIGOnSimulatedHost(t *testing.T) {
	gates := t.TempDir()
	d := startDaemon(t, t.TempDir(), "1xH200")
	st, err := d.Status()
	if err != nil {
		t.Fatal(err)
	}
	parent := st.GPUs[0].UUID
	r := gatedJob(gates, map[string]string{"mig-profile": "1g.18gb"}, 0)
	r.Command = []string{"/bin/sh", "-c", `echo "$CUDA_VISIBLE_DEVICES $TESSERA_MIG_PROFILES $TESSERA_MIG_PARENT_UUIDS $TESSERA_MEMORY_LIMIT"; g="$GATES/$TESSERA_JOB_ID"; while [ ! -s "$g" ]; do [ -d "$GATES" ] || exit 99; sleep 0.02; done; exit "$(cat "$g")"`}
	var ids []string
	for i := 0; i < 8; i++ {
		ids = append(ids, submit(t, d, r).ID)
	}
	eventually(t, "seven MIG jobs running", func() bool {
		n := 0
		for _, id := range ids[:7] {
			if started(t, d, id) {
				n++
			}
		}
		return n == 7
	})
	d.schedule()
	if s := states(t, d)[ids[7]]; s != api.Queued {
		t.Fatalf("eighth 1g.18gb instance: %s, want queued (7 per H200)", s)
	}
	seen := map[string]bool{}
	for _, id := range ids[:7] {
		j := job(t, d, id)
		if len(j.Shares) != 1 || j.Shares[0].MIGProfile != "1g.18gb" || !strings.HasPrefix(j.Shares[0].UUID, "MIG-"+parent+"/") {
			t.Fatalf("%s shares: %+v", id, j.Shares)
		}
		if seen[j.Shares[0].UUID] {
			t.Fatalf("instance %s handed out twice", j.Shares[0].UUID)
		}
		seen[j.Shares[0].UUID] = true
		out, _ := os.ReadFile(filepath.Join(d.JobDir(id), "stdout.log"))
		if want := j.Shares[0].UUID + " 1g.18gb " + parent + " 16384Mi\n"; string(out) != want {
			t.Errorf("%s env: %q, want %q", id, out, want)
		}
	}
	q, err := d.Queue()
	if err != nil || len(q) != 1 || q[0].Request != "1x MIG 1g.18gb" {
		t.Fatalf("queue = %+v, %v", q, err)
	}
	openGate(t, gates, ids[0], 0)
	eventually(t, "the eighth starts on the freed instance", func() bool { return states(t, d)[ids[7]] == api.Running })
	if j := job(t, d, ids[7]); !seen[j.Shares[0].UUID] {
		t.Errorf("eighth job got a new instance %s, want the freed one", j.Shares[0].UUID)
	}
	drain(t, d, gates)
	if j, _ := d.Wait(context.Background(), ids[7]); j.State != api.Succeeded {
		t.Fatalf("last MIG job: %s", j.State)
	}
}

func TestMIGRejected(t *testing.T) {
	tests := []struct {
		name, spec string
		simulated  bool
		profile    string
		want       string
	}{
		{"real GPUs", "1xH200", false, "1g.18gb", "only on a simulated host"},
		{"profile of another model", "1xH200", true, "1g.10gb", `must be a MIG profile this host's GPUs offer (1g.18gb`},
		{"no MIG GPUs", "1xL4", true, "1g.18gb", "(none of them supports MIG)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startDaemon(t, t.TempDir(), tt.spec, func(c *Config) { c.Simulated = tt.simulated })
			_, err := d.Submit(api.SubmitRequest{GPU: map[string]string{"mig-profile": tt.profile}, Command: []string{"/bin/true"}})
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != "mig-profile" || !strings.Contains(ie.Msg, tt.want) {
				t.Fatalf("err = %v, want an InputError on mig-profile with %q", err, tt.want)
			}
		})
	}
}
