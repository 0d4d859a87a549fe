package tracesim

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/queueing"
)

// QueueConfig is the queues of a dynamic replay (tessera sim dynamic
// --queues FILE, YAML or JSON) and the rule that maps the trace's pods to
// them: a pod goes to the queue whose qos list names its qos column
// (compared without case), else to the queue that lists "*"; a pod that
// matches neither is an error. Priorities give the pods of a qos class a
// priority (0 when not listed), which orders a queue's pods and allows
// preemption within a queue.
//
//	queues:
//	  - name: ls
//	    qos: [LS, Guaranteed, Burstable]
//	    guaranteed: 80%     # of the cluster's GPUs; or a number of GPUs: 4000
//	  - name: be
//	    qos: ["*"]
//	    preemptible: true
type QueueConfig struct {
	Queues []QueueSpec `json:"queues"`
	// Priorities are pod priorities by qos class.
	Priorities map[string]int32 `json:"priorities,omitempty"`
}

// QueueSpec is one queue of a QueueConfig.
type QueueSpec struct {
	Name string `json:"name"`
	// QoS lists the qos classes whose pods go to this queue; "*" takes the
	// pods no queue names.
	QoS []string `json:"qos"`
	// Guaranteed is the GPU compute the queue is entitled to (its share
	// for fair share and reclaim): "30%" of the cluster's GPUs, or a
	// number of GPUs (600, 0.5, "250m").
	Guaranteed GPUAmount `json:"guaranteed,omitempty"`
	// Weight shares what is left over the guarantees (0 means 1).
	Weight int32 `json:"weight,omitempty"`
	// Limit caps the queue's GPU compute, written as Guaranteed; 0 or
	// absent means none.
	Limit GPUAmount `json:"limit,omitempty"`
	// Preemptible: the queue's running pods may be stopped (by preemption
	// within the queue or reclaim by another queue) when the replay runs
	// with preemption. Pods of a queue that is not are never stopped.
	Preemptible bool `json:"preemptible,omitempty"`
}

// GPUAmount is an amount of GPU compute as written in a queue config: a
// percentage of the cluster's GPUs ("30%") or a number of GPUs (4, 0.5,
// "250m"), as a string or a number.
type GPUAmount string

// UnmarshalJSON accepts a string or a number, as queueing.Amount does.
func (a *GPUAmount) UnmarshalJSON(b []byte) error {
	var q queueing.Amount
	if err := q.UnmarshalJSON(b); err != nil {
		return fmt.Errorf("must be a number of GPUs such as 4 or 0.5, or a share of the cluster such as \"30%%\", got %s", bytes.TrimSpace(b))
	}
	*a = GPUAmount(q)
	return nil
}

// milli resolves a against a cluster of capacity GPU milli.
func (a GPUAmount) milli(capacity int64) (int64, error) {
	s := strings.TrimSpace(string(a))
	if s == "" {
		return 0, nil
	}
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || !(v >= 0 && v <= 100) {
			return 0, fmt.Errorf("must be a share of the cluster's GPUs in [0%%, 100%%], got %q", s)
		}
		return int64(math.Floor(v / 100 * float64(capacity))), nil
	}
	n, err := quantity.ParseShare(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("must be a number of GPUs such as 4 or 0.5, or a share of the cluster such as 30%%, got %q", s)
	}
	return n, nil
}

// LoadQueueConfig reads a queue config (YAML or JSON; unknown fields are
// refused) and checks what it can without the cluster: see Validate.
func LoadQueueConfig(path string) (*QueueConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var qc QueueConfig
	if err := yaml.UnmarshalStrict(b, &qc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := qc.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &qc, nil
}

// Validate checks the queues and the mapping: at least one queue, names
// valid and unique (package queueing's rules), every qos class named by
// one queue at most, one "*" at most, amounts well formed. Tree checks the
// amounts against a cluster.
func (qc *QueueConfig) Validate() error {
	if len(qc.Queues) == 0 {
		return errors.New("queues: at least one queue is needed")
	}
	owner := map[string]string{}
	for i, q := range qc.Queues {
		path := fmt.Sprintf("queues[%d]", i)
		if len(q.QoS) == 0 {
			return fmt.Errorf("%s.qos: list the qos classes whose pods go to queue %q (\"*\" for every other pod)", path, q.Name)
		}
		for _, c := range q.QoS {
			k := strings.ToLower(strings.TrimSpace(c))
			if other, dup := owner[k]; dup {
				return fmt.Errorf("%s.qos: %q already goes to queue %q", path, c, other)
			}
			owner[k] = q.Name
		}
		for field, a := range map[string]GPUAmount{"guaranteed": q.Guaranteed, "limit": q.Limit} {
			if _, err := a.milli(1000); err != nil {
				return fmt.Errorf("%s.%s: %w", path, field, err)
			}
		}
	}
	for c := range qc.Priorities {
		if _, ok := owner[strings.ToLower(strings.TrimSpace(c))]; !ok && owner["*"] == "" {
			return fmt.Errorf("priorities: no queue takes qos %q", c)
		}
	}
	names := make([]queueing.Queue, len(qc.Queues))
	for i, q := range qc.Queues {
		names[i] = queueing.Queue{Name: q.Name, Weight: q.Weight}
	}
	_, err := queueing.NewTree(names) // amounts are checked against a cluster: Tree
	return err
}

// Tree builds the queue tree for a cluster of capacity GPU milli: each
// guarantee within its limit, the guarantees within the cluster.
func (qc *QueueConfig) Tree(capacity int64) (*queueing.Tree, error) {
	qs := make([]queueing.Queue, len(qc.Queues))
	var sum int64
	for i, s := range qc.Queues {
		path := fmt.Sprintf("queues[%d]", i)
		g, err := s.Guaranteed.milli(capacity)
		if err != nil {
			return nil, fmt.Errorf("%s.guaranteed: %w", path, err)
		}
		l, err := s.Limit.milli(capacity)
		if err != nil {
			return nil, fmt.Errorf("%s.limit: %w", path, err)
		}
		sum += g
		qs[i] = queueing.Queue{Name: s.Name, Weight: s.Weight, Guaranteed: queueing.Resources{GPUMilli: g}, Limit: queueing.Resources{GPUMilli: l}}
	}
	if sum > capacity {
		return nil, fmt.Errorf("queues: the guarantees add up to %s GPUs, more than the cluster's %s", milliGPUs(sum), milliGPUs(capacity))
	}
	return queueing.NewTree(qs)
}

func milliGPUs(m int64) string { return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64) }

// CheckPods reports the first pod, in the given order, that no queue
// takes.
func (qc *QueueConfig) CheckPods(pods []TimedPod) error {
	for i := range pods {
		if _, _, ok := qc.queueOf(pods[i].QoS); !ok {
			return fmt.Errorf("pod %s: no queue takes qos %q (name it in a queue's qos list, or give one queue \"*\")", pods[i].Pod.Name, pods[i].QoS)
		}
	}
	return nil
}

// queueOf returns the index of the queue that takes pods of class qos, and
// their priority.
func (qc *QueueConfig) queueOf(qos string) (int, int32, bool) {
	k := strings.ToLower(strings.TrimSpace(qos))
	rest := -1
	for i, q := range qc.Queues {
		for _, c := range q.QoS {
			switch strings.ToLower(strings.TrimSpace(c)) {
			case k:
				return i, qc.priority(qos), true
			case "*":
				rest = i
			}
		}
	}
	return rest, qc.priority(qos), rest >= 0
}

func (qc *QueueConfig) priority(qos string) int32 {
	for c, p := range qc.Priorities {
		if strings.EqualFold(strings.TrimSpace(c), strings.TrimSpace(qos)) {
			return p
		}
	}
	return 0
}
