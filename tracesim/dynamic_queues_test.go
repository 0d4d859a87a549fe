package tracesim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadQueueConfig: YAML and JSON give the same config; a share of
// the cluster resolves against its capacity, a number is GPUs.
func TestLoadQueueConfig(t *testing.T) {
	yamlText := `
queues:
  - name: ls
    qos: [LS, Guaranteed]
    guaranteed: 75%
    weight: 2
    limit: 6
  - name: be
    qos: ["*"]
    guaranteed: 0.5
    preemptible: true
priorities: {LS: 3}
`
	jsonText := `{"queues": [
  {"name": "ls", "qos": ["LS", "Guaranteed"], "guaranteed": "75%", "weight": 2, "limit": 6},
  {"name": "be", "qos": ["*"], "guaranteed": "500m", "preemptible": true}],
 "priorities": {"LS": 3}}`
	for _, f := range []struct{ name, text string }{{"q.yaml", yamlText}, {"q.json", jsonText}} {
		qc, err := LoadQueueConfig(writeConfig(t, f.name, f.text))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		tree, err := qc.Tree(8000) // 8 GPUs
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		ls, _ := tree.Queue("ls")
		be, _ := tree.Queue("be")
		if ls.Guaranteed.GPUMilli != 6000 || ls.Limit.GPUMilli != 6000 || ls.Weight != 2 || be.Guaranteed.GPUMilli != 500 || be.Limit.GPUMilli != 0 {
			t.Errorf("%s: ls %+v, be %+v; want ls 6 GPUs guaranteed (75%% of 8) and limit 6, weight 2; be 0.5 GPU, no limit", f.name, ls, be)
		}
		if !qc.Queues[1].Preemptible || qc.Queues[0].Preemptible {
			t.Errorf("%s: preemptible %v %v, want false true", f.name, qc.Queues[0].Preemptible, qc.Queues[1].Preemptible)
		}
		for _, tc := range []struct {
			qos   string
			queue int
			prio  int32
		}{{"LS", 0, 3}, {"ls", 0, 3}, {"Guaranteed", 0, 0}, {"BE", 1, 0}, {"", 1, 0}} {
			q, prio, ok := qc.queueOf(tc.qos)
			if !ok || q != tc.queue || prio != tc.prio {
				t.Errorf("%s: qos %q goes to queue %d priority %d (%v), want %d priority %d", f.name, tc.qos, q, prio, ok, tc.queue, tc.prio)
			}
		}
	}
}

func TestQueueConfigErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`queues: []`, "at least one queue"},
		{"queues:\n- name: a\n  qos: [LS]\n- name: b\n  qos: [ls]\n", `"ls" already goes to queue "a"`},
		{"queues:\n- name: a\n  qos: [\"*\"]\n- name: b\n  qos: [\"*\"]\n", `"*" already goes to queue "a"`},
		{"queues:\n- name: a\n", `queues[0].qos: list the qos classes`},
		{"queues:\n- name: a\n  qos: [LS]\n  guaranteed: 120%\n", `queues[0].guaranteed: must be a share of the cluster's GPUs in [0%, 100%], got "120%"`},
		{"queues:\n- name: a\n  qos: [LS]\n  limit: lots\n", `queues[0].limit: must be a number of GPUs`},
		{"queues:\n- name: Big\n  qos: [LS]\n", `queues[0].name: must be a lowercase DNS label`},
		{"queues:\n- name: a\n  qos: [LS]\n  gpus: 3\n", `unknown field "gpus"`},
		{"queues:\n- name: a\n  qos: [LS]\npriorities: {BE: 1}\n", `priorities: no queue takes qos "BE"`},
	} {
		_, err := LoadQueueConfig(writeConfig(t, "q.yaml", tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one containing %q", tc.text, err, tc.want)
		}
	}
	// The guarantees must fit the cluster the replay runs on.
	qc := &QueueConfig{Queues: []QueueSpec{{Name: "a", QoS: []string{"*"}, Guaranteed: "60%"}, {Name: "b", QoS: []string{"BE"}, Guaranteed: "3"}}}
	if err := qc.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := qc.Tree(4000); err == nil || !strings.Contains(err.Error(), "add up to 5.4 GPUs, more than the cluster's 4") {
		t.Errorf("guarantees over the cluster: err %v", err)
	}
	qc = &QueueConfig{Queues: []QueueSpec{{Name: "a", QoS: []string{"*"}, Guaranteed: "50%", Limit: "2"}}}
	if _, err := qc.Tree(8000); err == nil || !strings.Contains(err.Error(), "queues[0].guaranteed: must be within queues[0].limit") {
		t.Errorf("a guarantee (4 GPUs of 8) over the limit (2): err %v", err)
	}
	if _, err := qc.Tree(4000); err != nil {
		t.Errorf("2 GPUs of 4 within a limit of 2: %v", err)
	}
}

// TestReplayDynamicOneQueueConfigChangesNothing: a config with one queue
// taking every pod replays exactly as no config (the default queue).
func TestReplayDynamicOneQueueConfigChangesNothing(t *testing.T) {
	nodes, err := LoadNodes("testdata/nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadTimedPods("testdata/timed_pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DynamicConfig{Trace: "t", Nodes: nodes, Pods: pods, Policy: "tessera", Seed: 3, Tune: 3, Load: 2, Period: 10}
	plain, err := ReplayDynamic(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Queues = &QueueConfig{Queues: []QueueSpec{{Name: "all", QoS: []string{"*"}}}}
	queued, err := ReplayDynamic(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if plain.NeverStarted == plain.Pods || plain.DelayMean == 0 {
		t.Fatalf("the replay should start pods and make some wait: %+v", plain)
	}
	if plain.AllocatedPct != queued.AllocatedPct || plain.DelayMean != queued.DelayMean || plain.DelayP99 != queued.DelayP99 ||
		plain.Started != queued.Started || plain.Cycles != queued.Cycles || len(plain.Series) != len(queued.Series) {
		t.Errorf("one queue for all moved the results:\nplain  %+v\nqueued %+v", plain, queued)
	}
	if len(queued.Queues) != 1 || queued.Queues[0].Pods != queued.Pods || queued.Queues[0].AllocatedPct != queued.AllocatedPct || queued.Queues[0].DelayMean != queued.DelayMean {
		t.Errorf("the one queue's results %+v should be the whole replay's", queued.Queues)
	}
}
