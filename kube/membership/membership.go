package membership

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	batchlisters "k8s.io/client-go/listers/batch/v1"

	"github.com/tessera-gpu/tessera/dispatch"
	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/queues"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/queueing"
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

// Reader reads what a pod belongs to from the pod and the objects it
// names. Its zero value reads the pod alone (no Jobs, no PodGroups).
type Reader struct {
	// Jobs lists Jobs, for automatic gangs (nil: none).
	Jobs batchlisters.JobLister
	// PodGroup reads a PodGroup (nil: none).
	PodGroup func(namespace, name string) (podgroups.Group, bool, error)
	// VolcanoGroup reads a Volcano PodGroup (nil: none).
	VolcanoGroup func(namespace, name string) (podgroups.VolcanoGroup, bool, error)
	// SchedulerPluginsGroup reads a scheduler-plugins PodGroup (nil: none).
	SchedulerPluginsGroup func(namespace, name string) (podgroups.Group, bool, error)
	// WorkloadGroup reads a Workload API PodGroup (scheduling.k8s.io; nil:
	// none).
	WorkloadGroup func(namespace, name string) (podgroups.WorkloadGroup, bool, error)
}

func (r Reader) schedulerPluginsGroup(namespace, name string) (podgroups.Group, bool, error) {
	if r.SchedulerPluginsGroup == nil {
		return podgroups.Group{}, false, nil
	}
	return r.SchedulerPluginsGroup(namespace, name)
}

func (r Reader) workloadGroup(namespace, name string) (podgroups.WorkloadGroup, bool, error) {
	if r.WorkloadGroup == nil {
		return podgroups.WorkloadGroup{}, false, nil
	}
	return r.WorkloadGroup(namespace, name)
}

// SchedulingGroup is the Workload API PodGroup a pod names in
// spec.schedulingGroup.podGroupName ("" when none).
func SchedulingGroup(p *corev1.Pod) string {
	if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		return *g.PodGroupName
	}
	return ""
}

// workloadGang reports whether the Workload API PodGroup a pod names makes
// it a gang member: a gang policy, or a group that cannot be read (missing
// or malformed: MinMember says why, and the members wait). A basic policy
// does not: such a pod is read by the other rules (a Job controller with
// the WorkloadWithJob gate gives every Job's pods a basic group unless the
// Job asks for a gang).
func (r Reader) workloadGang(p *corev1.Pod) (string, bool) {
	name := SchedulingGroup(p)
	if name == "" {
		return "", false
	}
	g, found, err := r.workloadGroup(p.Namespace, name)
	return name, err != nil || !found || g.Gang
}

func (r Reader) podGroup(namespace, name string) (podgroups.Group, bool, error) {
	if r.PodGroup == nil {
		return podgroups.Group{}, false, nil
	}
	return r.PodGroup(namespace, name)
}

func (r Reader) volcanoGroup(namespace, name string) (podgroups.VolcanoGroup, bool, error) {
	if r.VolcanoGroup == nil {
		return podgroups.VolcanoGroup{}, false, nil
	}
	return r.VolcanoGroup(namespace, name)
}

// Gang returns the pod's gang key, or "" for a pod outside any gang:
// the LabelPodGroup label, else the Volcano PodGroup its
// scheduling.k8s.io/group-name annotation names, else the scheduler-plugins
// PodGroup its scheduling.x-k8s.io/pod-group label names, else the
// Workload API PodGroup its spec.schedulingGroup names when that group is
// a gang, else the Job that controls the pod when the Job runs more than
// one pod at a time (an automatic gang of its parallelism, or of KAI's
// batch-min-member).
func (r Reader) Gang(p *corev1.Pod) string {
	if name := p.Labels[LabelPodGroup]; name != "" {
		return p.Namespace + "/" + name
	}
	if name := p.Annotations[workload.VolcanoAnnotationGroupName]; name != "" {
		return p.Namespace + "/volcano:" + name
	}
	if name := p.Labels[workload.SchedulerPluginsLabelPodGroup]; name != "" {
		return p.Namespace + "/x-k8s:" + name
	}
	if name, ok := r.workloadGang(p); ok {
		return p.Namespace + "/podgroup:" + name
	}
	if job, ok := r.jobOf(p); ok && Parallelism(job) > 1 {
		return p.Namespace + "/job:" + job.Name
	}
	return ""
}

// MinMember reads a member's minimum: the PodGroup's or the annotation
// for labelled gangs, the Volcano PodGroup's minMember for Volcano's, the
// scheduler-plugins PodGroup's minMember, the Workload API PodGroup's
// gang minCount, and for automatic ones KAI's batch-min-member (on the
// Job, else on the pod) or else the Job's parallelism.
func (r Reader) MinMember(p *corev1.Pod) (int, error) {
	name := p.Labels[LabelPodGroup]
	if name == "" {
		if vg := p.Annotations[workload.VolcanoAnnotationGroupName]; vg != "" {
			return r.volcanoMinMember(p.Namespace, vg)
		}
		if sg := p.Labels[workload.SchedulerPluginsLabelPodGroup]; sg != "" {
			g, err := r.schedulerPluginsMember(p.Namespace, sg)
			return g.MinMember, err
		}
		if wg, ok := r.workloadGang(p); ok {
			return r.workloadMinMember(p.Namespace, wg)
		}
		if job, ok := r.jobOf(p); ok {
			return JobMinMember(job, p)
		}
	}
	if g, found, err := r.podGroup(p.Namespace, name); err != nil {
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
func (r Reader) volcanoMinMember(namespace, name string) (int, error) {
	g, found, err := r.volcanoGroup(namespace, name)
	if err != nil {
		return 0, fmt.Errorf("annotation %s: %w", workload.VolcanoAnnotationGroupName, err)
	}
	if !found {
		return 0, fmt.Errorf("annotation %s: Volcano PodGroup %s/%s not found (Tessera reads the gang's minMember from it; Volcano's Job controller creates it, with Volcano's CRDs installed): create it, or remove the annotation", workload.VolcanoAnnotationGroupName, namespace, name)
	}
	return g.MinMember, nil
}

// schedulerPluginsMember reads the scheduler-plugins PodGroup a pod names.
func (r Reader) schedulerPluginsMember(namespace, name string) (podgroups.Group, error) {
	g, found, err := r.schedulerPluginsGroup(namespace, name)
	if err != nil {
		return podgroups.Group{}, fmt.Errorf("label %s: %w", workload.SchedulerPluginsLabelPodGroup, err)
	}
	if !found {
		return podgroups.Group{}, fmt.Errorf("label %s: PodGroup %s/%s (scheduling.x-k8s.io) not found (Tessera reads the gang's minMember from it; Kubeflow's training operator creates it with scheduler-plugins' CRD installed): create it, or remove the label", workload.SchedulerPluginsLabelPodGroup, namespace, name)
	}
	return g, nil
}

// workloadMinMember reads the gang minimum of the Workload API PodGroup a
// pod names.
func (r Reader) workloadMinMember(namespace, name string) (int, error) {
	g, found, err := r.workloadGroup(namespace, name)
	if err != nil {
		return 0, fmt.Errorf("spec.schedulingGroup.podGroupName: %w", err)
	}
	if !found {
		return 0, fmt.Errorf("spec.schedulingGroup.podGroupName: PodGroup %s/%s (scheduling.k8s.io) not found (Tessera reads the gang's minCount from it; a Workload controller such as the Job controller creates it, where kube-apiserver serves scheduling.k8s.io/v1beta1 with the GenericWorkload gate): create it", namespace, name)
	}
	return g.MinMember, nil
}

// JobMinMember is an automatic gang's minimum: KAI's batch-min-member on
// the Job (else on the pod, from the Job's pod template), else the Job's
// parallelism.
func JobMinMember(job *batchv1.Job, p *corev1.Pod) (int, error) {
	v, ok := job.Annotations[workload.KAIAnnotationMinMember]
	where := "annotation " + workload.KAIAnnotationMinMember + " of Job " + job.Name
	if !ok {
		v, ok = p.Annotations[workload.KAIAnnotationMinMember]
		where = "annotation " + workload.KAIAnnotationMinMember
	}
	if !ok {
		return int(Parallelism(job)), nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxGangSize {
		return 0, fmt.Errorf("%s: must be a whole number in [1, %d], got %q", where, MaxGangSize, v)
	}
	return n, nil
}

// jobOf returns the Job controlling the pod, if r lists Jobs.
func (r Reader) jobOf(p *corev1.Pod) (*batchv1.Job, bool) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "Job" || r.Jobs == nil {
		return nil, false
	}
	job, err := r.Jobs.Jobs(p.Namespace).Get(ref.Name)
	if err != nil || job.UID != ref.UID {
		return nil, false
	}
	return job, true
}

// Parallelism is how many pods the Job runs at a time.
func Parallelism(j *batchv1.Job) int32 {
	if j.Spec.Parallelism == nil {
		return 1
	}
	return *j.Spec.Parallelism
}

// GangSpecs reads the definition of every gang a pending pod names: its
// minimum (members must agree) and its PodGroup's schedule timeout. The
// core groups the members and counts the running ones.
func (r Reader) GangSpecs(pending []*corev1.Pod) map[string]dispatch.GangSpec {
	out := map[string]dispatch.GangSpec{}
	for _, p := range pending {
		k := r.Gang(p)
		if k == "" {
			continue
		}
		g, ok := out[k]
		if !ok {
			g.Timeout = r.timeout(p)
		}
		n, err := r.MinMember(p)
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

// timeout is the schedule timeout of the PodGroup (Tessera's or
// scheduler-plugins') that a gang member names by label (0: none).
func (r Reader) timeout(p *corev1.Pod) time.Duration {
	if name := p.Labels[LabelPodGroup]; name != "" {
		pg, _, _ := r.podGroup(p.Namespace, name)
		return pg.Timeout
	}
	if p.Annotations[workload.VolcanoAnnotationGroupName] != "" {
		return 0
	}
	if name := p.Labels[workload.SchedulerPluginsLabelPodGroup]; name != "" {
		pg, _, _ := r.schedulerPluginsGroup(p.Namespace, name)
		return pg.Timeout
	}
	return 0
}

// GangFromJob reports whether Gang reads p's gang from its Job (whose
// parallelism may change without the pod changing).
func GangFromJob(p *corev1.Pod) bool { return !namesGroup(p) && jobControlled(p) }

// GangFromGroup reports whether Gang reads p's gang from the Workload API
// PodGroup it names (which may be made, or made again, after the pod).
func GangFromGroup(p *corev1.Pod) bool { return !namesGroup(p) && SchedulingGroup(p) != "" }

func namesGroup(p *corev1.Pod) bool {
	return p.Labels[LabelPodGroup] != "" || p.Annotations[workload.VolcanoAnnotationGroupName] != "" ||
		p.Labels[workload.SchedulerPluginsLabelPodGroup] != ""
}

func jobControlled(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "Job"
}

// Queue is the pod's queue name: its tessera.io/queue label, else KAI's
// kai.scheduler/queue label, else the queue of its Volcano PodGroup, else
// the default queue.
func (r Reader) Queue(p *corev1.Pod) string {
	q, _ := r.QueueSource(p)
	return q
}

// QueueSource is Queue with where the name came from, for messages.
func (r Reader) QueueSource(p *corev1.Pod) (queue, from string) {
	if q := p.Labels[queues.LabelQueue]; q != "" {
		return q, "label " + queues.LabelQueue
	}
	if q := p.Labels[workload.KAILabelQueue]; q != "" {
		return q, "label " + workload.KAILabelQueue
	}
	if name := p.Annotations[workload.VolcanoAnnotationGroupName]; name != "" {
		if g, found, err := r.volcanoGroup(p.Namespace, name); err == nil && found && g.Queue != "" {
			return g.Queue, "spec.queue of Volcano PodGroup " + p.Namespace + "/" + name
		}
	}
	return queueing.DefaultQueue, ""
}

// QueueFromGroup reports whether QueueSource reads p's queue from its
// Volcano PodGroup (which may change without the pod changing).
func QueueFromGroup(p *corev1.Pod) bool {
	return p.Labels[queues.LabelQueue] == "" && p.Labels[workload.KAILabelQueue] == "" && p.Annotations[workload.VolcanoAnnotationGroupName] != ""
}

// FromObjects reads groups through get (a watch's lookup of unstructured
// objects by namespace and name) converted with conv: for Reader's
// PodGroup and VolcanoGroup. A group that cannot be converted is not
// found, with conv's error.
func FromObjects[G any](get func(namespace, name string) (*unstructured.Unstructured, bool, error), conv func(*unstructured.Unstructured) (G, error)) func(namespace, name string) (G, bool, error) {
	return func(namespace, name string) (G, bool, error) {
		var zero G
		u, found, err := get(namespace, name)
		if !found || err != nil {
			return zero, found, err
		}
		g, err := conv(u)
		if err != nil {
			return zero, false, err
		}
		return g, true, nil
	}
}
