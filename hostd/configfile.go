package hostd

import (
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/queueing"
)

// ConfigFile is the daemon's configuration file (`tessera up --config`),
// in YAML:
//
//	queues:
//	  - name: research
//	    guaranteed: {gpu: 1}
//	    weight: 2
//	  - name: batch
//	    limit: {gpu: 4}
//	    idleReclaimAfter: 2h
//	preemption:
//	  minRuntime: 5m
//
// A queue has the fields of the cluster's Queue resource (parent,
// priority, guaranteed, weight, limit, idleReclaimAfter: off unless set,
// see docs/host.md for its risks). Unknown fields are errors.
type ConfigFile struct {
	Queues     []queueing.Spec  `json:"queues,omitempty"`
	Preemption PreemptionConfig `json:"preemption,omitempty"`
}

// PreemptionConfig is the preemption section of a ConfigFile.
type PreemptionConfig struct {
	// Disabled turns preemption off.
	Disabled bool `json:"disabled,omitempty"`
	// MinRuntime protects jobs that have run less than this (a Go
	// duration: 90s, 5m); empty keeps the daemon's default.
	MinRuntime string `json:"minRuntime,omitempty"`
}

// Settings are a ConfigFile's validated contents.
type Settings struct {
	Queues            []queueing.Queue
	DisablePreemption bool
	// MinRuntime is nil when the file does not set it.
	MinRuntime *time.Duration
}

// LoadConfigFile reads and validates a configuration file; errors name the
// file and the field.
func LoadConfigFile(path string) (Settings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Settings{}, fmt.Errorf("config %s: %w", path, err)
	}
	s, err := ParseConfig(data)
	if err != nil {
		return Settings{}, fmt.Errorf("config %s: %w", path, err)
	}
	return s, nil
}

// ParseConfig validates a configuration file's YAML.
func ParseConfig(data []byte) (Settings, error) {
	var f ConfigFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return Settings{}, fmt.Errorf("parse: %w", err)
	}
	qs, _, err := queueing.FromSpecs(f.Queues)
	if err != nil {
		return Settings{}, err
	}
	s := Settings{Queues: qs, DisablePreemption: f.Preemption.Disabled}
	if f.Preemption.MinRuntime != "" {
		d, err := time.ParseDuration(f.Preemption.MinRuntime)
		if err != nil || d < 0 {
			return Settings{}, fmt.Errorf("preemption.minRuntime: must be a duration >= 0 such as 90s or 5m, got %q", f.Preemption.MinRuntime)
		}
		s.MinRuntime = &d
	}
	return s, nil
}
