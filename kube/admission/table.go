package admission

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/kube/workload"
)

// Where a key of another system sits on a pod.
const (
	OnAnnotation = "annotation"
	OnResource   = "resource" // a container's resources.limits
	OnLabel      = "label"
)

// How a key of another system is carried over.
const (
	// Exact: the pod gets what it got upstream.
	Exact = "exact"
	// Refused: admission denies the pod with the reason and what to write
	// instead (Row.Tessera says it too).
	Refused = "refused"
	// Scheduler: the key stays on the pod and the scheduler reads it
	// itself (queues and gangs).
	Scheduler = "read by the scheduler"
)

// Row is one key of another GPU system: what it means there, what it
// becomes in Tessera, and the test case that shows it.
type Row struct {
	System, Key, On string
	// Upstream is the key's documented meaning in its own system.
	Upstream string
	// Tessera is its equivalent, or why it is refused and what to write
	// instead.
	Tessera string
	// How is Exact, Refused or Scheduler.
	How string
	// Test names the case of mutate_test.go's migration table that
	// exercises the row (a test checks every row has one).
	Test string
}

// Table lists every key of another GPU system the webhook and the
// scheduler know, one row per key, in the order docs/migration.md shows
// them. A key not in the table is not another system's GPU key: pods keep
// it untouched.
func Table() []Row {
	return []Row{
		{"KAI-Scheduler", workload.KAIAnnotationFraction, OnAnnotation, "a share of one GPU (its memory; KAI caps no compute)",
			"tessera.io/gpu: 1 with gpu-fraction as the guaranteed share, gpu-fraction-limit 1 (bursts to the whole GPU), memory in proportion", Exact, "KAI fraction"},
		{"KAI-Scheduler", workload.KAIAnnotationMemory, OnAnnotation, "MiB of one GPU's memory (KAI caps no compute)",
			"tessera.io/gpu-memory in Mi; the compute guarantee follows memory, the limit is the whole GPU", Exact, "KAI memory"},
		{"KAI-Scheduler", workload.KAIAnnotationNumDevices, OnAnnotation, "how many GPUs get the fraction or memory",
			"the count of tessera.io/gpu", Exact, "KAI memory on two devices"},
		{"KAI-Scheduler", workload.KAIAnnotationContainerName, OnAnnotation, "the container that gets the fraction (default: the first)",
			"that container gets tessera.io/gpu; an init container is refused (Tessera gives GPUs to regular containers only)", Exact, "KAI container name"},
		{"KAI-Scheduler", workload.KAILabelQueue, OnLabel, "the pod's queue",
			"the scheduler reads it as tessera.io/queue (which wins when both are set and agree; they must not disagree)", Scheduler, "KAI queue label"},
		{"KAI-Scheduler", workload.KAIAnnotationMinMember, OnAnnotation, "on a Job: the gang minimum instead of the Job's parallelism",
			"the scheduler reads it from the pod's Job (or the pod of a Job); on a pod without a Job it is refused: use label tessera.io/pod-group with tessera.io/pod-group-min-member", Scheduler, "KAI min member on a bare pod"},
		{"NVIDIA device plugin", workload.ResourceNVIDIAGPU, OnResource, "whole GPUs",
			"tessera.io/gpu, whole GPUs", Exact, "nvidia.com/gpu"},
		{"HAMi", workload.HAMiResourceMemory, OnResource, "MiB of memory per GPU (compute uncapped without gpucores)",
			"tessera.io/gpu-memory.<container> in Mi; without gpucores the compute guarantee follows memory and bursts to the whole GPU", Exact, "HAMi gpumem"},
		{"HAMi", workload.HAMiResourceMemoryPercent, OnResource, "a percentage of each GPU's memory",
			"with gpucores: tessera.io/gpu-memory.<container> as a percentage, apart from compute; alone: the same compute share, bursting to the whole GPU", Exact, "HAMi gpumem-percentage apart from gpucores"},
		{"HAMi", workload.HAMiResourceCores, OnResource, "a percentage of each GPU's compute, a cap",
			"tessera.io/gpu-fraction.<container> (guarantee and limit)", Exact, "HAMi gpucores"},
		{"HAMi", workload.HAMiAnnotationUseType, OnAnnotation, "allowed GPU types, each a substring of the device name",
			"tessera.io/gpu-model: the catalog models whose names or aliases contain an entry", Exact, "HAMi use-gputype"},
		{"HAMi", workload.HAMiAnnotationNoUseType, OnAnnotation, "excluded GPU types, each a substring of the device name",
			"tessera.io/gpu-model: the catalog models whose names and aliases contain no entry", Exact, "HAMi nouse-gputype"},
		{"HAMi", workload.HAMiAnnotationUseUUID, OnAnnotation, "allowed GPU UUIDs",
			"refused: Tessera does not pin pods to GPUs; constrain the model or the nodes instead", Refused, "HAMi use-gpuuuid"},
		{"HAMi", workload.HAMiAnnotationNoUseUUID, OnAnnotation, "excluded GPU UUIDs",
			"refused: Tessera does not pin pods away from GPUs; constrain the model or the nodes instead", Refused, "HAMi nouse-gpuuuid"},
		{"HAMi", workload.HAMiAnnotationVGPUMode, OnAnnotation, "hami-core (soft shares), mig (a MIG instance of the smallest profile holding gpumem) or mps",
			"hami-core: dropped (Tessera's shares are the same kind); mig: tessera.io/mig-profile.<container>, the smallest profile holding gpumem (least memory, then fewest compute slices, never +me), with tessera.io/gpu-model.<container> the models where it is the smallest; refused when those differ between the allowed models (name them with use-gputype); mps: refused (MPS is a node's sharing mode in Tessera)", Exact, "HAMi vgpu-mode mig"},
		{"HAMi", workload.HAMiAnnotationNodePolicy, OnAnnotation, "binpack or spread across nodes (default binpack)",
			"with the GPU policy: both binpack → tessera.io/placement-policy binpack, both spread → spread; different ones are refused", Exact, "HAMi policies spread"},
		{"HAMi", workload.HAMiAnnotationGPUPolicy, OnAnnotation, "binpack or spread across a node's GPUs (default spread)",
			"as hami.io/node-scheduler-policy; topology-aware is refused", Exact, "HAMi policies binpack"},
		{"Volcano", workload.VolcanoResourceNumber, OnResource, "vGPUs (one per GPU)",
			"the count of tessera.io/gpu", Exact, "Volcano vgpu"},
		{"Volcano", workload.VolcanoResourceMemory, OnResource, "MiB of memory per vGPU",
			"as HAMi's gpumem", Exact, "Volcano vgpu"},
		{"Volcano", workload.VolcanoResourceMemoryPercent, OnResource, "a percentage of each GPU's memory",
			"as HAMi's gpumem-percentage", Exact, "Volcano vgpu-memory-percentage"},
		{"Volcano", workload.VolcanoResourceCores, OnResource, "a percentage of each GPU's compute, a cap",
			"as HAMi's gpucores", Exact, "Volcano vgpu"},
		{"Volcano", workload.VolcanoAnnotationGroupName, OnAnnotation, "the pod's PodGroup (scheduling.volcano.sh), written by Volcano's Job controller",
			"the scheduler reads the PodGroup's minMember (the gang minimum) and queue; it must not be combined with tessera.io/pod-group", Scheduler, "Volcano group with a Tessera group"},
		{"scheduler-plugins", workload.SchedulerPluginsLabelPodGroup, OnLabel, "the pod's PodGroup (scheduling.x-k8s.io) of the coscheduling plugin, as Kubeflow's training operator and JobSet write it",
			"the scheduler reads the PodGroup's minMember (the gang minimum) and scheduleTimeoutSeconds; it must not be combined with tessera.io/pod-group or Volcano's group", Scheduler, "scheduler-plugins group with a Volcano group"},
		{"nvshare", workload.NvshareResourceGPU, OnResource, "1: one of the (by default 10) virtual GPUs of the node's GPU, with the whole card's memory through managed memory and no guarantee, taking exclusive turns while the working sets do not fit",
			"tessera.io/gpu: 1 with gpu-fraction.<container> 0.1 (a guarantee nvshare lacks: at most 10 per GPU), gpu-fraction-limit 1 and gpu-memory-limit 100% (the whole card), and tessera.io/oversubscribe: \"true\" (only nodes whose agent runs with --oversubscribe; the arbiter's exclusive slices while working sets do not fit); other counts are refused", Exact, "nvshare"},
	}
}

// MatchExpression is the CEL expression that selects the pods the webhook
// must see: those carrying any annotation or container resource (init
// containers included) of Table, resource tessera.io/gpu or
// tessera.io/gpu-milli, or a Tessera request annotation (KEY or
// KEY.<container>). deploy/webhook.yaml's matchConditions must select at
// least these pods.
func MatchExpression() string { return requestMatch("object", "has(object.metadata.annotations)") }

// JobMatchExpression is the CEL expression that selects the batch/v1 Jobs
// the webhook must see: those whose pod template carries a key
// MatchExpression selects in a pod. deploy/webhook.yaml's matchConditions
// must select at least these Jobs.
func JobMatchExpression() string { return templateMatch("object.spec.template") }

// JobSetMatchExpressions are the CEL expressions that select the JobSets
// (jobset.x-k8s.io) the webhook must see: scheduler, those with a
// replicated Job whose template names the scheduler schedulerName, and
// request, those with a replicated Job whose template carries a key
// MatchExpression selects in a pod. A custom resource is not defaulted
// before admission, so every optional field is tested before it is read:
// a JobSet naming no scheduler makes scheduler false, not an error.
// deploy/webhook.yaml's matchConditions must select at least these
// JobSets.
func JobSetMatchExpressions(schedulerName string) (scheduler, request string) {
	const tmpl = "r.template.spec.template"
	// Each level down to the template's spec, tested before it is read.
	present := "has(r.template) && has(r.template.spec) && has(" + tmpl + ") && has(" + tmpl + ".spec)"
	scheduler = fmt.Sprintf("has(object.spec.replicatedJobs) && object.spec.replicatedJobs.exists(r, %s && "+
		"has(%s.spec.schedulerName) && %s.spec.schedulerName == '%s')", present, tmpl, tmpl, schedulerName)
	request = "object.spec.replicatedJobs.exists(r, " + present + " && (" + templateMatch(tmpl) + "))"
	return scheduler, request
}

// templateMatch is requestMatch for the pod template at tmpl, whose
// metadata may be absent in the request, where a pod's is not.
func templateMatch(tmpl string) string {
	return requestMatch(tmpl, "has("+tmpl+".metadata) && has("+tmpl+".metadata.annotations)")
}

// requestMatch selects the pod at root ("object", or a template's path)
// when it carries another system's GPU key (foreignMatch) or one of
// Tessera's; hasAnn tests that it has annotations.
func requestMatch(root, hasAnn string) string {
	res := []string{"'" + workload.ResourceGPU + "'", "'" + workload.ResourceGPUMilli + "'"}
	var ann []string
	for _, k := range tesseraAnnotationKeys() {
		ann = append(ann, "'"+k+"'")
	}
	in := "c, has(c.resources) && [" + strings.Join(res, ", ") + "].exists(k, (has(c.resources.limits) && k in c.resources.limits) || " +
		"(has(c.resources.requests) && k in c.resources.requests))"
	return fmt.Sprintf("%[1]s || %[2]s.spec.containers.exists(%[3]s) || "+
		"(%[4]s && %[2]s.metadata.annotations.exists(k, [%[5]s].exists(p, k == p || k.startsWith(p + '.'))))",
		foreignMatch(root, hasAnn), root, in, hasAnn, strings.Join(ann, ", "))
}

// foreignMatch selects the pod at root when it carries any annotation or
// container resource (init containers included) of Table.
func foreignMatch(root, hasAnn string) string {
	var ann, res []string
	for _, r := range Table() {
		switch {
		case r.On == OnAnnotation && r.Key != workload.VolcanoAnnotationGroupName:
			ann = append(ann, "'"+r.Key+"'")
		case r.On == OnResource:
			res = append(res, "'"+r.Key+"'")
		}
	}
	ann, res = dedup(ann), dedup(res)
	list := func(s []string) string { return "[" + strings.Join(s, ", ") + "]" }
	// A container may name an extended resource in its limits, its
	// requests or both: both are looked at.
	inContainer := func(res string) string {
		return "c, has(c.resources) && " + res + ".exists(k, (has(c.resources.limits) && k in c.resources.limits) || " +
			"(has(c.resources.requests) && k in c.resources.requests))"
	}
	return fmt.Sprintf("(%[4]s && %[2]s.exists(k, k in %[1]s.metadata.annotations)) || "+
		"%[1]s.spec.containers.exists(%[3]s) || "+
		"(has(%[1]s.spec.initContainers) && %[1]s.spec.initContainers.exists(%[3]s))",
		root, list(ann), inContainer(list(res)), hasAnn)
}

func dedup(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// entry writes one AnnotationMigratedFrom entry; a value with a comma or
// a quote is quoted, so entries stay separable.
func entry(key, value string) string {
	if strings.ContainsAny(value, `,"`) {
		return fmt.Sprintf("%s=%q", key, value)
	}
	return key + "=" + value
}

// fromPodAnnotations translates HAMi's pod annotations: the allowed and
// excluded types become tessera.io/gpu-model (the models kube/workload
// resolved, the same for every container), vgpu-mode is dropped (hami-core
// is Tessera's kind of share; fromResources writes mig's profile),
// and the node and GPU policies become tessera.io/placement-policy.
func (t *translation) fromPodAnnotations(pod *corev1.Pod, reqs []workload.ContainerRequest) error {
	drop := func(key string) bool {
		v, ok := pod.Annotations[key]
		if ok {
			t.removeAnn = append(t.removeAnn, key)
			t.replaced = append(t.replaced, entry(key, v))
		}
		return ok
	}
	use := drop(workload.HAMiAnnotationUseType)
	nouse := drop(workload.HAMiAnnotationNoUseType)
	if (use || nouse) && len(reqs) > 0 {
		t.addAnn[workload.AnnotationModel] = strings.Join(reqs[0].GPU.Models, ",")
	}
	drop(workload.HAMiAnnotationVGPUMode) // kube/workload allowed only hami-core and mig
	policy, key, ok, err := workload.PlacementPolicy(pod)
	if err != nil {
		return err
	}
	if ok && key != workload.AnnotationPolicy {
		drop(workload.HAMiAnnotationNodePolicy)
		drop(workload.HAMiAnnotationGPUPolicy)
		t.addAnn[workload.AnnotationPolicy] = policy
	}
	return nil
}
