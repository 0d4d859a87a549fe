package dra

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tessera-gpu/tessera/agent/cdi"
	"github.com/tessera-gpu/tessera/agent/checkpoint"
	"github.com/tessera-gpu/tessera/binding"
	"github.com/tessera-gpu/tessera/internal/statefile"
)

// JournalFile is the journal's name in the state folder.
const JournalFile = "dra-claims.json"

// journalVersion is the journal format written and understood.
const journalVersion = 1

// journalFormat is the journal's kind of state file.
func journalFormat() statefile.Format {
	return statefile.Format{Name: "DRA claim journal", Version: journalVersion}
}

// Claim is one prepared claim as the journal records it: enough to seat
// it again, rewrite its CDI spec as it was handed out and answer kubelet
// the same after a restart.
type Claim struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Key names the claim's arbiter seat and state folder.
	Key string `json:"key"`
	// Shares are the claim's GPU shares, in GPU index order.
	Shares []binding.Share `json:"shares"`
	// Pods are the pods the claim was reserved for when it was prepared
	// (status.reservedFor), for metrics' labels.
	Pods []string `json:"pods,omitempty"`
	// Devices is the answer given to kubelet.
	Devices []Device `json:"devices"`
	// Spec is the claim's CDI spec, as written.
	Spec     cdi.Spec  `json:"spec"`
	Prepared time.Time `json:"prepared"`
}

// Device is one allocated device in kubelet's answer.
type Device struct {
	Requests     []string `json:"requests"`
	Pool         string   `json:"pool"`
	Device       string   `json:"device"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
	ShareID      string   `json:"shareID,omitempty"`
}

type journalData struct {
	Version int     `json:"version"`
	Node    string  `json:"node"`
	Claims  []Claim `json:"claims"`
}

// journal is the file of prepared claims; every change is on disk before
// its method returns. Not safe for concurrent use (the plugin locks).
type journal struct {
	path string
	data journalData
}

// openJournal loads the journal at path for node; no file is an empty
// journal. A damaged file, one of another version or node, or one with
// fields it does not know, is an error rather than a guess
// (internal/statefile reads and writes it).
func openJournal(path, node string) (*journal, error) {
	j := &journal{path: path, data: journalData{Version: journalVersion, Node: node}}
	var d journalData
	found, err := journalFormat().Load(path, &d)
	if err != nil {
		return nil, err
	}
	if !found {
		return j, nil
	}
	if d.Node != node {
		return nil, fmt.Errorf("DRA claim journal %s: belongs to node %q, not %q", path, d.Node, node)
	}
	for i, c := range d.Claims {
		if c.UID == "" || c.Key == "" || len(c.Shares) == 0 {
			return nil, fmt.Errorf("DRA claim journal %s: claims[%d]: uid, key and shares must be set", path, i)
		}
	}
	j.data = d
	return j, nil
}

func (j *journal) claims() []Claim { return slices.Clone(j.data.Claims) }

func (j *journal) get(uid string) (Claim, bool) {
	i := slices.IndexFunc(j.data.Claims, func(c Claim) bool { return c.UID == uid })
	if i < 0 {
		return Claim{}, false
	}
	return j.data.Claims[i], true
}

// put records c (replacing a record of the same UID) and saves.
func (j *journal) put(c Claim) error {
	next := slices.DeleteFunc(slices.Clone(j.data.Claims), func(o Claim) bool { return o.UID == c.UID })
	return j.save(append(next, c))
}

// remove drops the record of uid, if any, and saves.
func (j *journal) remove(uid string) error {
	next := slices.DeleteFunc(slices.Clone(j.data.Claims), func(o Claim) bool { return o.UID == uid })
	if len(next) == len(j.data.Claims) {
		return nil
	}
	return j.save(next)
}

func (j *journal) save(claims []Claim) error {
	d := j.data
	d.Claims = claims
	if err := os.MkdirAll(filepath.Dir(j.path), 0o755); err != nil {
		return fmt.Errorf("DRA claim journal: %w", err)
	}
	if err := journalFormat().Save(j.path, d); err != nil {
		return err
	}
	j.data = d
	return nil
}

// Allocation is the claim as an allocation record, the form the agent's
// metrics read its containers' shares in: pod is the first pod the claim
// was reserved for, container "claim/" and the claim's name (every
// container of the pod that names the claim shares it).
func (c Claim) Allocation() checkpoint.Entry {
	e := checkpoint.Entry{Key: c.Key, Namespace: c.Namespace, Container: "claim/" + c.Name, GPUs: c.Shares, Created: c.Prepared}
	if len(c.Pods) > 0 {
		e.Pod = c.Pods[0]
	}
	for _, d := range c.Devices {
		e.DeviceIDs = append(e.DeviceIDs, d.Device)
	}
	return e
}
