package admission

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/workload"
)

// AnnotationMigratedFrom records, on a pod the webhook translated, the
// annotations it replaced ("gpu-fraction=0.5,gpu-fraction-num-devices=2").
// It is informational: nothing reads it.
const AnnotationMigratedFrom = "tessera.io/migrated-from"

// Config configures a Handler.
type Config struct {
	// SchedulerName is the spec.schedulerName of the pods to mutate (the
	// Tessera scheduler's --name); pods of other schedulers are left alone.
	SchedulerName string
	// Catalog validates requests, as the scheduler does (catalog.Default()).
	Catalog *catalog.Catalog
	// Log receives one line per mutated or denied pod; nil discards.
	Log *slog.Logger
}

// Handler decides what to do with a pod at admission. It is safe for
// concurrent use.
type Handler struct {
	cfg Config
}

// New checks cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.SchedulerName == "":
		return nil, errors.New("admission: scheduler name must be set")
	case cfg.Catalog == nil:
		return nil, errors.New("admission: catalog must be set")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg}, nil
}

// Operation is one JSON Patch (RFC 6902) operation.
type Operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// kaiKeys are KAI-Scheduler's pod annotations, in the order the patch
// replaces them, with the Tessera annotation each becomes ("" for the GPU
// count, which becomes the tessera.io/gpu resource).
func kaiKeys() []struct{ kai, tessera string } {
	return []struct{ kai, tessera string }{
		{workload.KAIAnnotationFraction, workload.AnnotationCompute},
		{workload.KAIAnnotationMemory, workload.AnnotationMemory},
		{workload.KAIAnnotationNumDevices, ""},
	}
}

// tesseraAnnotationKeys are the annotations that carry a Tessera request;
// each may also be written KEY.<container>.
func tesseraAnnotationKeys() []string {
	return []string{
		workload.AnnotationCompute, workload.AnnotationComputeLimit,
		workload.AnnotationMemory, workload.AnnotationMemoryLimit,
		workload.AnnotationExclusive, workload.AnnotationMIGProfile, workload.AnnotationModel,
	}
}

// Mutate returns the JSON Patch that makes pod request tessera.io/gpu, or
// nil when the pod needs no change: it belongs to another scheduler, asks
// for no GPU, or asks through a resource already. An invalid request
// returns a *workload.Error naming the pod's key and the allowed range.
//
// The patched pod asks for exactly the same request.GPU as the original
// (kube/workload reads both), and its container requests one tessera.io/gpu
// unit per GPU, which is what the node agent matches Allocate calls by.
func (h *Handler) Mutate(pod *corev1.Pod) ([]Operation, error) {
	if pod.Spec.SchedulerName != h.cfg.SchedulerName {
		return nil, nil
	}
	reqs, err := workload.FromPod(pod, h.cfg.Catalog)
	if err != nil {
		return nil, err
	}
	var kai *workload.ContainerRequest
	for i := range reqs {
		if reqs[i].Convention == workload.KAI {
			kai = &reqs[i]
		}
	}
	if kai == nil {
		return nil, nil
	}
	for _, key := range tesseraAnnotationKeys() {
		for k := range pod.Annotations {
			if k == key || strings.HasPrefix(k, key+".") {
				return nil, &workload.Error{Key: k, Message: "conflicts with KAI's gpu-fraction/gpu-memory annotations: use either those or Tessera's annotations with resource " + workload.ResourceGPU + ", not both"}
			}
		}
	}
	idx := -1
	for i, c := range pod.Spec.Containers {
		if c.Name == kai.Container {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("admission: kube/workload named container %q, which the pod does not have", kai.Container)
	}

	var ops []Operation
	var replaced []string
	added := map[string]string{}
	for _, k := range kaiKeys() {
		v, ok := pod.Annotations[k.kai]
		if !ok {
			continue
		}
		ops = append(ops, Operation{Op: "remove", Path: "/metadata/annotations/" + escape(k.kai)})
		replaced = append(replaced, k.kai+"="+v)
		switch k.tessera {
		case "":
		case workload.AnnotationMemory:
			// KAI writes plain MiB; Tessera's key takes a quantity.
			added[k.tessera] = fmt.Sprintf("%dMi", kai.GPU.MemoryMiB)
		default:
			added[k.tessera] = v
		}
	}
	sort.Strings(replaced)
	added[AnnotationMigratedFrom] = strings.Join(replaced, ",")
	keys := make([]string, 0, len(added))
	for k := range added {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops = append(ops, Operation{Op: "add", Path: "/metadata/annotations/" + escape(k), Value: added[k]})
	}
	res := withGPUs(pod.Spec.Containers[idx].Resources, kai.GPU.Count)
	// The whole resources object is replaced, so the patch applies whether
	// or not the submitted pod spelled out resources, limits or requests.
	ops = append(ops, Operation{Op: "add", Path: fmt.Sprintf("/spec/containers/%d/resources", idx), Value: res})

	// The scheduler and the agent must read the patched pod as the same
	// request; refuse rather than admit a pod they would disagree on.
	patched := pod.DeepCopy()
	for _, k := range kaiKeys() {
		delete(patched.Annotations, k.kai)
	}
	for k, v := range added {
		patched.Annotations[k] = v
	}
	patched.Spec.Containers[idx].Resources = res
	after, err := workload.FromPod(patched, h.cfg.Catalog)
	if err != nil {
		return nil, fmt.Errorf("admission: the translated pod is invalid: %w", err)
	}
	if len(after) != 1 || after[0].Container != kai.Container || after[0].Convention != workload.Tessera || !reflect.DeepEqual(after[0].GPU, kai.GPU) {
		return nil, fmt.Errorf("admission: translating container %s changed its request from %+v to %+v", kai.Container, kai.GPU, after)
	}
	return ops, nil
}

// withGPUs returns a copy of r that requests n tessera.io/gpu (limit and
// request, as kubelet requires equal values for extended resources).
func withGPUs(r corev1.ResourceRequirements, n int) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	q := *resource.NewQuantity(int64(n), resource.DecimalSI)
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	out.Limits[workload.ResourceGPU] = q
	out.Requests[workload.ResourceGPU] = q
	return out
}

// escape writes a map key as a JSON Pointer token (RFC 6901).
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
