package placement

import "slices"

// Remembered class scores. A class's score for a pod depends on the
// class's state, the pod and the policy's inputs for the decision (its
// settings, what it derived from the typical pods, a table built from
// the cluster); between two decisions only the classes a change touched
// have another state. A policy that can name its inputs for a decision
// (an epoch: a comparable value that differs whenever any input does)
// lets the class chooser keep each class's feasibility and score per pod
// shape and score again only the classes whose state is new since, so a
// decision costs a pass over the remembered scores plus the few classes
// the last decisions changed.
//
// A class's version (nodeClass.ver) is new whenever its state may be:
// when the class is made (a key names a state; an id is reused only for
// a new key) and, for a unique class (whose key names a node, not its
// state), whenever that node is changed. A remembered score counts only
// for the version it was taken at, the same pod (every field placement
// reads: all but the name) and the same epoch.

// memoShapes is how many pod shapes a class index remembers scores for
// (a scheduler sees a few shapes over and over; the least recently used
// is forgotten).
const memoShapes = 4

// memoKey is what a policy says about the decision it asks for: on
// when its scores depend only on the class, the pod and epoch.
type memoKey struct {
	on    bool
	epoch any // must be comparable
}

// classMemo holds remembered scores for one class index.
type classMemo struct {
	slots [memoShapes]shapeScores
	tick  uint64
}

// shapeScores is the scores of one pod shape under one epoch, by class id.
type shapeScores struct {
	used  uint64 // 0: empty
	pod   Pod
	epoch any
	ver   []uint64 // the class version scored at; 0: not scored
	score []float64
	fits  []bool
}

// slot returns the scores for pod p under epoch, over classes ids below n:
// those remembered, or a slot emptied for them (the least recently used).
func (m *classMemo) slot(p *Pod, epoch any, n int) *shapeScores {
	m.tick++
	var lru *shapeScores
	for i := range m.slots {
		s := &m.slots[i]
		if s.used != 0 && s.epoch == epoch && samePod(&s.pod, p) {
			s.used = m.tick
			s.grow(n)
			return s
		}
		if lru == nil || s.used < lru.used {
			lru = s
		}
	}
	lru.used, lru.pod, lru.epoch = m.tick, *p, epoch
	lru.pod.Name, lru.pod.GPU.Models = "", slices.Clone(p.GPU.Models)
	clear(lru.ver)
	lru.grow(n)
	return lru
}

// grow makes room for class ids below n (not scored).
func (s *shapeScores) grow(n int) {
	for len(s.ver) < n {
		s.ver = append(s.ver, 0)
		s.score = append(s.score, 0)
		s.fits = append(s.fits, false)
	}
}

// samePod reports whether a and b ask for the same, names aside
// (TestSamePodReadsEveryField keeps it in step with request.GPU).
func samePod(a, b *Pod) bool {
	ga, gb := &a.GPU, &b.GPU
	// A pod with a preference is rated per node (never by class): its
	// scores are nobody else's.
	return a.Prefer == nil && b.Prefer == nil && a.OpensCordoned == b.OpensCordoned && a.CPUMilli == b.CPUMilli && a.MemoryMiB == b.MemoryMiB && a.Slot == b.Slot &&
		ga.Count == gb.Count && ga.ComputeMilli == gb.ComputeMilli && ga.ComputeLimitMilli == gb.ComputeLimitMilli &&
		ga.MemoryMiB == gb.MemoryMiB && ga.MemoryLimitMiB == gb.MemoryLimitMiB &&
		ga.MemoryShareMilli == gb.MemoryShareMilli && ga.MemoryLimitShareMilli == gb.MemoryLimitShareMilli &&
		ga.Exclusive == gb.Exclusive && ga.MIGProfile == gb.MIGProfile && slices.Equal(ga.Models, gb.Models)
}
