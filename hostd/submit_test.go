package hostd

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// Each rejected submission names its field, the value given and what
// this host allows (its GPUs, models, memory, MIG profiles), never the
// engine's words, and queues nothing.
func TestSubmitSaysWhatThisHostAllows(t *testing.T) {
	ok := []string{"/bin/true"}
	tests := []struct {
		name   string
		spec   string
		fields map[string]string
		field  string
		want   []string
		not    []string
	}{
		{"count not a number", "1xH100", map[string]string{"count": "x"}, "count",
			[]string{`must be a whole number in [1, 1] (this host has 1 GPU: 1 H100-SXM of 79.6Gi), got "x"`}, nil},
		{"count above the host", "2xH200", map[string]string{"count": "3"}, "count",
			[]string{`must be in [1, 2] (this host has 2 GPUs: 2 H200 of 140.4Gi), got "3"`}, nil},
		{"count above the catalog", "1xH100", map[string]string{"count": "17"}, "count",
			[]string{`[1, 1]`, `got "17"`}, nil},
		{"memory above the GPU", "1xH100", map[string]string{"memory": "90Gi"}, "memory",
			[]string{`must be at most 81559Mi (about 79.6Gi), the memory of this host's largest GPU (H100-SXM), got "90Gi"`}, nil},
		{"memory above any model", "1xH100", map[string]string{"memory": "200Gi", "compute": "0.5"}, "memory",
			[]string{`this host's largest GPU (H100-SXM), got "200Gi"`}, []string{"MI300X"}},
		{"memory above the allowed model", "2xA100-80GB+2xL4", map[string]string{"memory": "30Gi", "model": "L4"}, "memory",
			[]string{`the memory of this host's largest GPU allowed by --model L4 (L4), got "30Gi"`}, nil},
		{"more GPUs with that memory than the host has", "2xA100-80GB+2xL4", map[string]string{"count": "3", "memory": "30Gi"}, "count",
			[]string{`must be at most 2 with --gpu-memory 30Gi (this host's GPUs with that much memory: 2 A100-80GB of 80Gi), got "3"`}, nil},
		{"more GPUs of the model than the host has", "2xA100-80GB+2xL4", map[string]string{"count": "3", "model": "L4"}, "count",
			[]string{`must be at most 2 with --model L4 (this host has 2 L4 of 22.5Gi), got "3"`}, nil},
		{"model the host lacks", "1xH100", map[string]string{"model": "H200"}, "model",
			[]string{`must be a model this host has (H100-SXM), got "H200"`}, nil},
		{"model nobody knows", "1xH100", map[string]string{"model": "Z9000"}, "model",
			[]string{`must be a model this host has (H100-SXM), got "Z9000"`}, nil},
		{"memory limit above the GPU", "1xH100", map[string]string{"compute": "0.5", "memory-limit": "100Gi"}, "memory-limit",
			[]string{`must be at most 81559Mi (about 79.6Gi), the memory of this host's largest GPU (H100-SXM), got "100Gi"`}, nil},
		{"memory limit just above the GPU", "1xH100", map[string]string{"memory": "10Gi", "memory-limit": "80Gi"}, "memory-limit",
			[]string{`must be at most 81559Mi`, `got "80Gi"`}, nil},
		{"limit below compute in flag words", "1xH100", map[string]string{"compute": "0.5", "compute-limit": "0.25"}, "compute-limit",
			[]string{`must be in [0.5, 1] (at least --gpu-fraction, the guaranteed compute), got "0.25"`}, nil},
		{"memory limit alone", "1xH100", map[string]string{"memory-limit": "20Gi"}, "memory-limit",
			[]string{`needs --gpu-memory`, `--gpu-fraction`, `got "20Gi" alone`, "79.6Gi", "H100-SXM"}, []string{`got ""`}},
		{"memory limit alone, above the GPU", "1xH100", map[string]string{"memory-limit": "100Gi"}, "memory-limit",
			[]string{`must be at most 81559Mi (about 79.6Gi)`, "H100-SXM", `got "100Gi"`, `needs --gpu-memory`}, []string{`got ""`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startDaemon(t, t.TempDir(), tt.spec)
			_, err := d.Submit(api.SubmitRequest{GPU: tt.fields, Command: ok})
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("err = %v, want an InputError on %q", err, tt.field)
			}
			for _, w := range tt.want {
				if !strings.Contains(ie.Msg, w) {
					t.Errorf("message %q lacks %q", ie.Msg, w)
				}
			}
			for _, w := range append([]string{"pod", "node", "feasible", "0m ", "sim-0", tt.field + ":"}, tt.not...) {
				if strings.Contains(ie.Msg, w) {
					t.Errorf("message %q says %q", ie.Msg, w)
				}
			}
			if jobs, _ := d.Jobs(); len(jobs) != 0 {
				t.Errorf("queued %d jobs", len(jobs))
			}
		})
	}
}

// Requests within this host's bounds are accepted: memory and limits up
// to the GPU's memory, a model family the host has.
func TestSubmitAcceptsWhatThisHostAllows(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "1xH100")
	for _, fields := range []map[string]string{
		{"memory": "81559Mi", "memory-limit": "81559Mi"},
		{"compute": "0.5", "memory-limit": "60Gi"},
		{"model": "h100|H200"},
	} {
		j, err := d.Submit(api.SubmitRequest{GPU: fields, Command: []string{"/bin/true"}})
		if err != nil {
			t.Errorf("%v: %v", fields, err)
			continue
		}
		if _, err := d.Wait(t.Context(), j.ID); err != nil {
			t.Errorf("%v: wait: %v", fields, err)
		}
	}
}

// The head of the queue says what it waits for in host words: how many
// GPUs with how much free, and how many have that now.
func TestQueueReasonInHostWords(t *testing.T) {
	tests := []struct {
		name    string
		running map[string]string
		waiting map[string]string
		want    string
	}{
		{"whole GPU", map[string]string{"count": "1"}, map[string]string{"count": "1"}, "waiting for GPU capacity: needs 1 whole GPU free (free now: 0 of 1)"},
		{"share with memory", map[string]string{"compute": "0.75"}, map[string]string{"compute": "0.5", "memory": "20Gi"}, "waiting for GPU capacity: needs 1 GPU with 0.5 of its compute and 20Gi of memory free (free now: 0 of 1)"},
		{"memory-only share", map[string]string{"memory": "100Gi"}, map[string]string{"memory": "50Gi"}, "waiting for GPU capacity: needs 1 GPU with 50Gi of memory free (free now: 0 of 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gates := t.TempDir()
			d := startDaemon(t, t.TempDir(), "1xH200", func(c *Config) { c.DisablePreemption = true })
			first, err := d.Submit(gatedJob(gates, tt.running, 0))
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "first job running", func() bool { return states(t, d)[first.ID] == api.Running })
			second, err := d.Submit(gatedJob(gates, tt.waiting, 0))
			if err != nil {
				t.Fatal(err)
			}
			q, err := d.Queue()
			if err != nil || len(q) != 1 || q[0].ID != second.ID {
				t.Fatalf("queue = %+v, %v", q, err)
			}
			if q[0].Reason != tt.want {
				t.Errorf("reason %q, want %q", q[0].Reason, tt.want)
			}
			openGate(t, gates, first.ID, 0)
			openGate(t, gates, second.ID, 0)
			if _, err := d.Wait(t.Context(), second.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Issue #34 (6): a request ID makes a submission idempotent for its
// owner (another user's same ID is another job, and the index survives a
// restart), and a submission read after the client's NotAfter queues
// nothing.
func TestSubmitOnce(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, dir, "1xH100")
	alice, bob := uint32(1000), uint32(1001)
	req := func(owner *uint32, id string) api.SubmitRequest {
		return api.SubmitRequest{GPU: map[string]string{"compute": "0.1"}, Command: []string{"/bin/sleep", "600"}, RequestID: id, OwnerUID: owner}
	}
	first, created, err := d.SubmitOnce(req(&alice, "request-0001"))
	if err != nil || !created {
		t.Fatalf("first submission: created %v, %v", created, err)
	}
	again, created, err := d.SubmitOnce(req(&alice, "request-0001"))
	if err != nil || created || again.ID != first.ID {
		t.Errorf("the same owner's retry: %s created %v %v, want %s, not created", again.ID, created, err, first.ID)
	}
	other, created, err := d.SubmitOnce(req(&bob, "request-0001"))
	if err != nil || !created || other.ID == first.ID {
		t.Errorf("another owner's same ID: %s created %v %v, want a job of its own", other.ID, created, err)
	}
	for _, bad := range []string{"short", strings.Repeat("x", 65), "has space1", "semi;colon"} {
		_, _, err := d.SubmitOnce(req(&alice, bad))
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != "requestId" || !strings.Contains(ie.Msg, "must be 8 to 64 characters") {
			t.Errorf("request ID %q: %v", bad, err)
		}
	}
	past := time.Now().Add(-time.Second)
	late := req(&alice, "request-0002")
	late.NotAfter = &past
	var ie *InputError
	if _, _, err := d.SubmitOnce(late); !errors.As(err, &ie) || ie.Field != "notAfter" || !strings.Contains(ie.Msg, "nothing was queued") {
		t.Errorf("a submission read after the client gave up: %v", err)
	}
	jobs, err := d.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Errorf("%d jobs, want 2 (alice's and bob's)", len(jobs))
	}
	for _, j := range jobs {
		if _, err := d.Stop(j.ID); err != nil {
			t.Error(err)
		}
		if _, err := d.Wait(t.Context(), j.ID); err != nil {
			t.Error(err)
		}
	}
	d.shutdown()
	d = startDaemon(t, dir, "1xH100")
	if again, created, err := d.SubmitOnce(req(&alice, "request-0001")); err != nil || created || again.ID != first.ID {
		t.Errorf("after a restart: %s created %v %v, want %s", again.ID, created, err, first.ID)
	}
}
