package scheduler

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/dispatch"
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

// gangSpecs reads the definition of every gang a pending pod names: its
// minimum (members must agree) and its PodGroup's schedule timeout. The
// core groups the members and counts the running ones.
func (s *Scheduler) gangSpecs(pending []*corev1.Pod) map[string]dispatch.GangSpec {
	out := map[string]dispatch.GangSpec{}
	for _, p := range pending {
		k := s.groupKey(p)
		if k == "" {
			continue
		}
		g, ok := out[k]
		if !ok && p.Labels[LabelPodGroup] != "" {
			if pg, found, _ := s.podGroup(p.Namespace, p.Labels[LabelPodGroup]); found {
				g.Timeout = pg.Timeout
			}
		}
		n, err := s.minMember(p)
		switch {
		case g.Err != nil:
		case err != nil:
			g.Err = err
		case g.Min != 0 && n != g.Min:
			g.Err = fmt.Errorf("annotation %s: members disagree (%d and %d); set the same value on every member", AnnotationMinMember, g.Min, n)
		default:
			g.Min = n
		}
		out[k] = g
	}
	return out
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
