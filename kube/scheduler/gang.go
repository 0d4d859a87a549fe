package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/kube/workload"
)

// Gang membership, until the PodGroup resource lands: pods of one group
// share the label LabelPodGroup (the group is namespaced) and carry the
// annotation AnnotationMinMember with the group's minimum.
const (
	LabelPodGroup       = "tessera.io/pod-group"
	AnnotationMinMember = "tessera.io/pod-group-min-member"
	// MaxGangSize bounds minMember.
	MaxGangSize = 10000
)

// gang is one group's state in a cycle.
type gang struct {
	key     string // namespace/name
	min     int
	pending []*corev1.Pod
	bound   int // members already bound (or assumed)
	err     error
	// timeout is the PodGroup's schedule timeout (0: none).
	timeout time.Duration
}

// groupKey returns the pod's gang key, or "" for a pod outside any gang:
// the LabelPodGroup label, else the Volcano PodGroup its
// scheduling.k8s.io/group-name annotation names, else the Job that
// controls the pod when the Job runs more than one pod at a time (an
// automatic gang of its parallelism, or of KAI's batch-min-member).
func (s *Scheduler) groupKey(p *corev1.Pod) string {
	if name := p.Labels[LabelPodGroup]; name != "" {
		return p.Namespace + "/" + name
	}
	if name := p.Annotations[workload.VolcanoAnnotationGroupName]; name != "" {
		return p.Namespace + "/volcano:" + name
	}
	if job, ok := s.jobOf(p); ok && parallelism(job) > 1 {
		return p.Namespace + "/job:" + job.Name
	}
	return ""
}

// minMember reads a member's minimum: the PodGroup's or the annotation
// for labelled gangs, the Volcano PodGroup's minMember for Volcano's, and
// for automatic ones KAI's batch-min-member (on the Job, else on the pod)
// or else the Job's parallelism.
func (s *Scheduler) minMember(p *corev1.Pod) (int, error) {
	name := p.Labels[LabelPodGroup]
	if name == "" {
		if vg := p.Annotations[workload.VolcanoAnnotationGroupName]; vg != "" {
			return s.volcanoMinMember(p.Namespace, vg)
		}
		if job, ok := s.jobOf(p); ok {
			return jobMinMember(job, p)
		}
	}
	if g, found, err := s.podGroup(p.Namespace, name); err != nil {
		return 0, fmt.Errorf("label %s: PodGroup %s/%s: %w", LabelPodGroup, p.Namespace, name, err)
	} else if found {
		return g.MinMember, nil
	}
	v, ok := p.Annotations[AnnotationMinMember]
	if !ok {
		return 0, fmt.Errorf("annotation %s: must be set on every pod with label %s (a whole number in [1, %d])", AnnotationMinMember, LabelPodGroup, MaxGangSize)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxGangSize {
		return 0, fmt.Errorf("annotation %s: must be a whole number in [1, %d], got %q", AnnotationMinMember, MaxGangSize, v)
	}
	return n, nil
}

// volcanoMinMember reads the minimum of the Volcano PodGroup a pod names.
func (s *Scheduler) volcanoMinMember(namespace, name string) (int, error) {
	g, found, err := s.volcanoGroup(namespace, name)
	if err != nil {
		return 0, fmt.Errorf("annotation %s: %w", workload.VolcanoAnnotationGroupName, err)
	}
	if !found {
		return 0, fmt.Errorf("annotation %s: Volcano PodGroup %s/%s not found (Tessera reads the gang's minMember from it; Volcano's Job controller creates it, with Volcano's CRDs installed): create it, or remove the annotation", workload.VolcanoAnnotationGroupName, namespace, name)
	}
	return g.MinMember, nil
}

// jobMinMember is an automatic gang's minimum: KAI's batch-min-member on
// the Job (else on the pod, from the Job's pod template), else the Job's
// parallelism.
func jobMinMember(job *batchv1.Job, p *corev1.Pod) (int, error) {
	v, ok := job.Annotations[workload.KAIAnnotationMinMember]
	where := "annotation " + workload.KAIAnnotationMinMember + " of Job " + job.Name
	if !ok {
		v, ok = p.Annotations[workload.KAIAnnotationMinMember]
		where = "annotation " + workload.KAIAnnotationMinMember
	}
	if !ok {
		return int(parallelism(job)), nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxGangSize {
		return 0, fmt.Errorf("%s: must be a whole number in [1, %d], got %q", where, MaxGangSize, v)
	}
	return n, nil
}

// jobOf returns the Job controlling the pod, if the scheduler watches Jobs.
func (s *Scheduler) jobOf(p *corev1.Pod) (*batchv1.Job, bool) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "Job" || s.jobs == nil {
		return nil, false
	}
	job, err := s.jobs.Jobs(p.Namespace).Get(ref.Name)
	if err != nil || job.UID != ref.UID {
		return nil, false
	}
	return job, true
}

func parallelism(j *batchv1.Job) int32 {
	if j.Spec.Parallelism == nil {
		return 1
	}
	return *j.Spec.Parallelism
}

// gangs groups the pending pods by gang (in queue order of their first
// member) and counts members already on nodes.
func (s *Scheduler) gangs(pending, occupying []*corev1.Pod) map[string]*gang {
	out := map[string]*gang{}
	for _, p := range pending {
		k := s.groupKey(p)
		if k == "" {
			continue
		}
		g, ok := out[k]
		if !ok {
			g = &gang{key: k}
			if name := p.Labels[LabelPodGroup]; name != "" {
				if pg, found, _ := s.podGroup(p.Namespace, name); found {
					g.timeout = pg.Timeout
				}
			}
			out[k] = g
		}
		g.pending = append(g.pending, p)
		n, err := s.minMember(p)
		switch {
		case err != nil && g.err == nil:
			g.err = err
		case err == nil && g.min != 0 && n != g.min && g.err == nil:
			g.err = fmt.Errorf("annotation %s: members disagree (%d and %d); set the same value on every member", AnnotationMinMember, g.min, n)
		case err == nil:
			g.min = n
		}
	}
	if len(out) == 0 {
		return out
	}
	for _, p := range occupying {
		if !mayBeInGang(p) {
			continue // most bound pods: no key to work out
		}
		if g, ok := out[s.groupKey(p)]; ok {
			g.bound++
		}
	}
	return out
}

// mayBeInGang reports whether groupKey can give p a key: it names a
// PodGroup or a Volcano group, or a Job controls it.
func mayBeInGang(p *corev1.Pod) bool {
	return namesGroup(p) || jobControlled(p)
}

// gangFromJob reports whether groupKey reads p's gang from its Job (whose
// parallelism may change without the pod changing).
func gangFromJob(p *corev1.Pod) bool { return !namesGroup(p) && jobControlled(p) }

func namesGroup(p *corev1.Pod) bool {
	return p.Labels[LabelPodGroup] != "" || p.Annotations[workload.VolcanoAnnotationGroupName] != ""
}

func jobControlled(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "Job"
}

func (st *CycleStats) count(o outcome) {
	switch o {
	case outcomeBound:
		st.Bound++
	case outcomeInvalid:
		st.Invalid++
	case outcomeUnschedulable:
		st.Unschedulable++
	case outcomeError:
		st.Errors++
	}
}

// waited is how long the gang's oldest pending member has existed.
func (g *gang) waited() time.Duration {
	var oldest time.Time
	for _, p := range g.pending {
		if oldest.IsZero() || p.CreationTimestamp.Time.Before(oldest) {
			oldest = p.CreationTimestamp.Time
		}
	}
	return time.Since(oldest)
}
