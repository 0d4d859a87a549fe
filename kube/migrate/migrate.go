package migrate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tessera-gpu/tessera/kube/podgroups"
	"github.com/tessera-gpu/tessera/kube/queues"
)

// Source kinds this package reads.
var (
	KAIQueue       = schema.GroupVersionKind{Group: "scheduling.run.ai", Version: "v2", Kind: "Queue"}
	VolcanoQueue   = schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "Queue"}
	VolcanoGroup   = schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"}
	tesseraVersion = "tessera.io/v1alpha1"
)

// Loss is one field that was not carried over exactly.
type Loss struct {
	// Object is "Kind namespace/name" (no namespace for cluster-scoped kinds).
	Object string
	// Field is the source field path ("spec.resources.cpu.quota").
	Field string
	// Reason says what happened to it and what to do.
	Reason string
}

func (l Loss) String() string { return l.Object + ": " + l.Field + ": " + l.Reason }

// Result is a translation: the Tessera objects, in input order, and the
// losses.
type Result struct {
	Objects []*unstructured.Unstructured
	Losses  []Loss
}

// Translate converts every object of a kind it knows; objects of other
// kinds are reported as losses (nothing to translate them into).
func Translate(objs []*unstructured.Unstructured) Result {
	var r Result
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		var out *unstructured.Unstructured
		var losses []Loss
		switch gvk {
		case KAIQueue:
			out, losses = fromKAIQueue(o)
		case VolcanoQueue:
			out, losses = fromVolcanoQueue(o)
		case VolcanoGroup:
			out, losses = fromVolcanoGroup(o)
		default:
			losses = []Loss{{Object: describe(o), Field: "kind", Reason: fmt.Sprintf("%s is not a kind tessera migrate translates (%s, %s, %s)", gvk, KAIQueue, VolcanoQueue, VolcanoGroup)}}
		}
		if out != nil {
			r.Objects = append(r.Objects, out)
		}
		r.Losses = append(r.Losses, losses...)
	}
	return r
}

func describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}

func tesseraObject(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": tesseraVersion, "kind": kind, "metadata": meta, "spec": spec}}
}

// fromKAIQueue: spec.parentQueue → parent, spec.priority → priority, and
// per resource (gpu, cpu in millicores, memory in MB) quota → guaranteed,
// limit → limit, gpu's overQuotaWeight → weight; -1 means unlimited.
func fromKAIQueue(o *unstructured.Unstructured) (*unstructured.Unstructured, []Loss) {
	obj := describe(o)
	var losses []Loss
	lose := func(field, reason string) { losses = append(losses, Loss{obj, field, reason}) }
	spec := map[string]any{}
	if p, ok, _ := unstructured.NestedString(o.Object, "spec", "parentQueue"); ok && p != "" {
		spec["parent"] = p
	}
	if v, ok := number(o.Object, "spec", "priority"); ok {
		if v != math.Trunc(v) {
			lose("spec.priority", fmt.Sprintf("%v is not a whole number; not carried over", v))
		} else {
			spec["priority"] = int64(v)
		}
	}
	guaranteed, limit := map[string]any{}, map[string]any{}
	for _, res := range []struct{ name, tessera string }{{"gpu", "gpu"}, {"cpu", "cpu"}, {"memory", "memory"}} {
		base := []string{"spec", "resources", res.name}
		if q, ok := number(o.Object, append(base, "quota")...); ok && q >= 0 {
			guaranteed[res.tessera] = kaiAmount(res.name, q)
		}
		if l, ok := number(o.Object, append(base, "limit")...); ok && l >= 0 {
			limit[res.tessera] = kaiAmount(res.name, l)
		}
		w, ok := number(o.Object, append(base, "overQuotaWeight")...)
		switch {
		case !ok:
		case res.name == "gpu" && w == math.Trunc(w) && w >= 0:
			spec["weight"] = int64(w)
		case res.name == "gpu":
			lose("spec.resources.gpu.overQuotaWeight", fmt.Sprintf("%v is not a whole number >= 0; Tessera's weight is one; not carried over", w))
		case w != 1:
			lose("spec.resources."+res.name+".overQuotaWeight", fmt.Sprintf("%v: Tessera has one weight per queue (taken from gpu); not carried over", w))
		}
	}
	if res, ok, _ := unstructured.NestedMap(o.Object, "spec", "resources"); ok {
		for _, k := range sortedKeys(res) {
			if k != "gpu" && k != "cpu" && k != "memory" {
				lose("spec.resources."+k, "no Tessera equivalent (queues measure gpu, gpuMemory, cpu and memory); not carried over")
			}
		}
	}
	if _, ok := guaranteed["memory"]; ok {
		lose("spec.resources.memory.quota", "KAI counts memory in MB; written in Mi, rounded up")
	}
	if len(guaranteed) > 0 {
		spec["guaranteed"] = guaranteed
	}
	if len(limit) > 0 {
		spec["limit"] = limit
	}
	return tesseraObject("Queue", "", o.GetName(), spec), losses
}

// kaiAmount writes a KAI quantity in Tessera's form: GPUs as a number, CPU
// millicores as "Nm", memory MB as MiB rounded up.
func kaiAmount(res string, v float64) string {
	switch res {
	case "cpu":
		return fmt.Sprintf("%dm", int64(math.Ceil(v)))
	case "memory":
		return fmt.Sprintf("%dMi", int64(math.Ceil(v*1e6/(1<<20))))
	}
	return trimFloat(v)
}

// fromVolcanoQueue: spec.weight → weight, spec.deserved → guaranteed,
// spec.capability → limit, spec.parent → parent, spec.priority → priority.
func fromVolcanoQueue(o *unstructured.Unstructured) (*unstructured.Unstructured, []Loss) {
	obj := describe(o)
	var losses []Loss
	lose := func(field, reason string) { losses = append(losses, Loss{obj, field, reason}) }
	spec := map[string]any{}
	if w, ok := number(o.Object, "spec", "weight"); ok {
		spec["weight"] = int64(w)
	}
	if p, ok, _ := unstructured.NestedString(o.Object, "spec", "parent"); ok && p != "" && p != "root" {
		spec["parent"] = p
	}
	if v, ok := number(o.Object, "spec", "priority"); ok {
		spec["priority"] = int64(v)
	}
	for _, f := range []struct{ from, to string }{{"deserved", "guaranteed"}, {"capability", "limit"}} {
		list, ok, _ := unstructured.NestedMap(o.Object, "spec", f.from)
		if !ok {
			continue
		}
		amounts := map[string]any{}
		for _, k := range sortedKeys(list) {
			q, err := resource.ParseQuantity(fmt.Sprint(list[k]))
			if err != nil {
				lose("spec."+f.from+"."+k, fmt.Sprintf("%v is not a quantity; not carried over", list[k]))
				continue
			}
			switch k {
			case "nvidia.com/gpu", "volcano.sh/vgpu-number":
				addGPU(amounts, q)
			case "cpu":
				amounts["cpu"] = q.String()
			case "memory":
				amounts["memory"] = fmt.Sprintf("%dMi", (q.Value()+(1<<20)-1)>>20)
			default:
				lose("spec."+f.from+"."+k, "no Tessera equivalent (queues measure gpu, gpuMemory, cpu and memory); not carried over")
			}
		}
		if len(amounts) > 0 {
			spec[f.to] = amounts
		}
	}
	if _, ok, _ := unstructured.NestedMap(o.Object, "spec", "guarantee"); ok {
		lose("spec.guarantee", "Volcano reserves these resources for the queue; Tessera guarantees spec.deserved (reclaimable from others) and reserves nothing; not carried over")
	}
	if r, ok, _ := unstructured.NestedBool(o.Object, "spec", "reclaimable"); ok && !r {
		lose("spec.reclaimable", "false: Tessera always reclaims a queue's use above its guarantee; not carried over")
	}
	return tesseraObject("Queue", "", o.GetName(), spec), losses
}

func addGPU(amounts map[string]any, q resource.Quantity) {
	total := q.AsApproximateFloat64()
	if prev, ok := amounts["gpu"].(string); ok {
		p, _ := resource.ParseQuantity(prev)
		total += p.AsApproximateFloat64()
	}
	amounts["gpu"] = trimFloat(total)
}

// fromVolcanoGroup: spec.minMember → minMember; the rest is reported.
func fromVolcanoGroup(o *unstructured.Unstructured) (*unstructured.Unstructured, []Loss) {
	obj := describe(o)
	g, err := podgroups.FromVolcano(o)
	if err != nil {
		return nil, []Loss{{obj, "spec", err.Error()}}
	}
	losses := []Loss{{obj, "metadata.name", "pods join the Tessera PodGroup with label tessera.io/pod-group: " + g.Name + "; pods that keep annotation scheduling.k8s.io/group-name use the Volcano PodGroup, which the scheduler reads directly"}}
	if g.Queue != "" {
		losses = append(losses, Loss{obj, "spec.queue", fmt.Sprintf("a Tessera PodGroup has no queue: label its pods %s: %s", queues.LabelQueue, g.Queue)})
	}
	for _, f := range []string{"minResources", "minTaskMember", "priorityClassName"} {
		if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", f); ok {
			losses = append(losses, Loss{obj, "spec." + f, "no Tessera equivalent (the gang minimum gates binding; priority comes from the pods); not carried over"})
		}
	}
	return tesseraObject("PodGroup", g.Namespace, g.Name, map[string]any{"minMember": int64(g.MinMember)}), losses
}

// number reads an int64 or float64 field.
func number(obj map[string]any, path ...string) (float64, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, path...)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

func trimFloat(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
