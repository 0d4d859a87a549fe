package workload

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/catalog"
)

// refusedAnnotations refuses the pod annotations of other systems that have
// no exact Tessera equivalent, saying what to write instead.
func refusedAnnotations(ann map[string]string) error {
	for _, key := range []string{HAMiAnnotationUseUUID, HAMiAnnotationNoUseUUID} {
		if _, ok := ann[key]; ok {
			return &Error{Key: key, Message: "Tessera does not pin pods to (or away from) GPU UUIDs: constrain the model with " + HAMiAnnotationUseType + " or " + AnnotationModel + ", or the nodes with a nodeSelector"}
		}
	}
	if v, ok := ann[HAMiAnnotationVGPUMode]; ok {
		switch strings.TrimSpace(v) {
		case "hami-core":
			// HAMi's default mode: soft shares with memory caps, as Tessera's.
		case "mig":
			// A MIG instance per GPU: FromPod reads the containers' gpumem
			// as the smallest profile holding it (hamiMIGFields).
		case "mps":
			return &Error{Key: HAMiAnnotationVGPUMode, Message: `"mps": in Tessera MPS is a node's sharing mode, set on the node agent, not a pod's; remove the annotation (pods on MPS nodes get MPS)`}
		default:
			return &Error{Key: HAMiAnnotationVGPUMode, Message: fmt.Sprintf(`must be "hami-core" (the default) or "mig" ("mps" is refused with a reason), got %q`, v)}
		}
	}
	return nil
}

// hamiModels turns HAMi's use-gputype and nouse-gputype into the catalog
// models they allow, written as Tessera's model field ("A100-40GB,A100-80GB"),
// with the key to blame; "" when neither is set. HAMi matches each
// comma-separated entry, ignoring case, as a substring of the device's
// name; Tessera matches it against each model's name and aliases (NVML's
// product names among them).
func hamiModels(ann map[string]string, cat *catalog.Catalog) (string, string, error) {
	use, hasUse := ann[HAMiAnnotationUseType]
	nouse, hasNoUse := ann[HAMiAnnotationNoUseType]
	if !hasUse && !hasNoUse {
		return "", "", nil
	}
	key := HAMiAnnotationUseType
	if !hasUse {
		key = HAMiAnnotationNoUseType
	}
	if cat == nil {
		return "", "", &Error{Key: key, Message: "needs the GPU model catalog"}
	}
	models := cat.Models()
	if hasUse {
		entries, err := typeEntries(HAMiAnnotationUseType, use)
		if err != nil {
			return "", "", err
		}
		var kept []catalog.Model
		for _, m := range models {
			if matchesAny(m, entries) {
				kept = append(kept, m)
			}
		}
		if len(kept) == 0 {
			return "", "", &Error{Key: HAMiAnnotationUseType, Message: fmt.Sprintf("%q matches no GPU model Tessera knows (see `tessera show-gpus -a`)", use)}
		}
		models = kept
	}
	if hasNoUse {
		entries, err := typeEntries(HAMiAnnotationNoUseType, nouse)
		if err != nil {
			return "", "", err
		}
		var kept []catalog.Model
		for _, m := range models {
			if !matchesAny(m, entries) {
				kept = append(kept, m)
			}
		}
		if len(kept) == 0 {
			return "", "", &Error{Key: HAMiAnnotationNoUseType, Message: fmt.Sprintf("%q excludes every GPU model that is left", nouse)}
		}
		models = kept
	}
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	sort.Strings(names)
	return strings.Join(names, ","), key, nil
}

func typeEntries(key, v string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.ToUpper(strings.TrimSpace(e)); e != "" {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, &Error{Key: key, Message: fmt.Sprintf("must be a comma-separated list of GPU types such as \"A100,V100\", got %q", v)}
	}
	return out, nil
}

func matchesAny(m catalog.Model, entries []string) bool {
	for _, n := range append([]string{m.Name}, m.Aliases...) {
		n = strings.ToUpper(n)
		for _, e := range entries {
			if strings.Contains(n, e) {
				return true
			}
		}
	}
	return false
}

// PlacementPolicy returns the placement policy a pod names, with the key
// it came from: tessera.io/placement-policy, or HAMi's node and GPU
// scheduler policies. Tessera's policies choose the node and the GPUs
// together, so HAMi's pair translates only when both say the same:
// binpack (Tessera's "binpack", packing nodes and GPUs) or spread. A key
// left out takes HAMi's documented default (node binpack, GPU spread).
// ok is false when the pod names none.
func PlacementPolicy(pod *corev1.Pod) (policy, key string, ok bool, err error) {
	if v, found := pod.Annotations[AnnotationPolicy]; found {
		if k := firstKey(pod.Annotations, HAMiAnnotationNodePolicy, HAMiAnnotationGPUPolicy); k != "" {
			return "", k, false, &Error{Key: k, Message: "conflicts with " + AnnotationPolicy + ": set one of them"}
		}
		return v, AnnotationPolicy, true, nil
	}
	node, hasNode := pod.Annotations[HAMiAnnotationNodePolicy]
	gpu, hasGPU := pod.Annotations[HAMiAnnotationGPUPolicy]
	if !hasNode && !hasGPU {
		return "", "", false, nil
	}
	for _, kv := range []struct{ key, v string }{{HAMiAnnotationNodePolicy, node}, {HAMiAnnotationGPUPolicy, gpu}} {
		if kv.v != "" && kv.v != "binpack" && kv.v != "spread" {
			return "", kv.key, false, &Error{Key: kv.key, Message: fmt.Sprintf(`must be "binpack" or "spread", got %q (Tessera has no equivalent of other HAMi policies; use annotation %s)`, kv.v, AnnotationPolicy)}
		}
	}
	if !hasNode {
		node = "binpack" // HAMi's default node policy
	}
	if !hasGPU {
		gpu = "spread" // HAMi's default GPU policy
	}
	key = HAMiAnnotationGPUPolicy
	if !hasGPU {
		key = HAMiAnnotationNodePolicy
	}
	if node != gpu {
		return "", key, false, &Error{Key: key, Message: fmt.Sprintf("node policy %s with GPU policy %s has no Tessera equivalent: Tessera's policies choose node and GPUs together; set both %s and %s to binpack or both to spread (an absent one is HAMi's default: node binpack, GPU spread), or name a policy with %s", node, gpu, HAMiAnnotationNodePolicy, HAMiAnnotationGPUPolicy, AnnotationPolicy)}
	}
	return node, key, true, nil
}

func firstKey(m map[string]string, keys ...string) string {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return k
		}
	}
	return ""
}

// CheckGangKeys refuses the queue and gang keys of other systems that the
// scheduler could not read as written: KAI's batch-min-member on a pod no
// Job controls, a Volcano or scheduler-plugins PodGroup next to a Tessera
// one, a scheduler-plugins PodGroup next to a Volcano one, and a KAI queue
// that disagrees with tessera.io/queue. The webhook refuses such a pod at
// admission; the scheduler leaves one that reached it unrewritten pending
// with the same message.
func CheckGangKeys(pod *corev1.Pod) error {
	if v, ok := pod.Annotations[KAIAnnotationMinMember]; ok {
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "Job" {
			return &Error{Key: KAIAnnotationMinMember, Message: fmt.Sprintf("set to %q on a pod that no Job controls: KAI reads it from a Job; for a gang of single pods use label %s with annotation tessera.io/pod-group-min-member", v, labelPodGroup)}
		}
	}
	if g, ok := pod.Annotations[VolcanoAnnotationGroupName]; ok {
		if own := pod.Labels[labelPodGroup]; own != "" {
			return &Error{Key: VolcanoAnnotationGroupName, Message: fmt.Sprintf("names Volcano PodGroup %q while label %s names %q: a pod is in one gang; keep one of them", g, labelPodGroup, own)}
		}
	}
	if g, ok := pod.Labels[SchedulerPluginsLabelPodGroup]; ok {
		if own := pod.Labels[labelPodGroup]; own != "" {
			return &Error{Key: SchedulerPluginsLabelPodGroup, Message: fmt.Sprintf("names PodGroup %q while label %s names %q: a pod is in one gang; keep one of them", g, labelPodGroup, own)}
		}
		if vg := pod.Annotations[VolcanoAnnotationGroupName]; vg != "" {
			return &Error{Key: SchedulerPluginsLabelPodGroup, Message: fmt.Sprintf("names PodGroup %q while annotation %s names Volcano PodGroup %q: a pod is in one gang; keep one of them", g, VolcanoAnnotationGroupName, vg)}
		}
	}
	if kq, ok := pod.Labels[KAILabelQueue]; ok {
		if tq, ok := pod.Labels[labelQueue]; ok && tq != kq {
			return &Error{Key: KAILabelQueue, Message: fmt.Sprintf("label %q disagrees with label %s %q: keep one of them", kq, labelQueue, tq)}
		}
	}
	return nil
}

// Tessera's queue and gang labels (owned by kube/queues and kube/scheduler;
// repeated here so that this package imports neither).
const (
	labelQueue    = "tessera.io/queue"
	labelPodGroup = "tessera.io/pod-group"
)
