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
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/kube/workload"
	"github.com/tessera-gpu/tessera/request"
)

// AnnotationMigratedFrom records, on a pod the webhook translated, the keys
// it replaced: KAI annotations as KEY=VALUE ("gpu-fraction=0.5"), container
// resources as CONTAINER:RESOURCE=VALUE ("train:nvidia.com/gpu=2"), joined
// by commas. It is informational: nothing reads it.
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
		{workload.KAIAnnotationContainerName, ""},
	}
}

// foreignResources are the container resources of other device plugins
// (NVIDIA's, HAMi's) that the webhook replaces by tessera.io/gpu, in the
// order they are recorded in AnnotationMigratedFrom.
func foreignResources() []string {
	return []string{workload.ResourceNVIDIAGPU, workload.HAMiResourceMemory, workload.HAMiResourceMemoryPercent, workload.HAMiResourceCores,
		workload.VolcanoResourceNumber, workload.VolcanoResourceMemory, workload.VolcanoResourceMemoryPercent, workload.VolcanoResourceCores}
}

// vgpuResources are the resource names of a convention that counts GPUs
// with count and may give memory in MiB, memory in percent and compute in
// percent ("" where the convention has none).
func vgpuResources(c workload.Convention) (count, memory, percent, cores string) {
	switch c {
	case workload.HAMi:
		return workload.ResourceNVIDIAGPU, workload.HAMiResourceMemory, workload.HAMiResourceMemoryPercent, workload.HAMiResourceCores
	case workload.Volcano:
		return workload.VolcanoResourceNumber, workload.VolcanoResourceMemory, workload.VolcanoResourceMemoryPercent, workload.VolcanoResourceCores
	}
	return workload.ResourceNVIDIAGPU, "", "", ""
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

// translation is what the webhook changes in a pod.
type translation struct {
	removeAnn []string          // annotations removed (KAI's)
	addAnn    map[string]string // annotations added or replaced
	resources map[int]corev1.ResourceRequirements
	replaced  []string // entries of AnnotationMigratedFrom
}

// Mutate returns the JSON Patch that makes pod request tessera.io/gpu and
// count its GPU share in tessera.io/gpu-milli, or nil when the pod needs
// no change: it belongs to another scheduler, asks for no GPU, or asks
// through tessera.io/gpu already with its gpu-milli written (or a share
// that follows memory, known only on the chosen GPU). A pod that asks
// through KAI's annotations, nvidia.com/gpu, HAMi's or Volcano's resources
// or nvshare.com/gpu is translated into Tessera's keys. An invalid request
// returns a *workload.Error naming the pod's key and the allowed range.
//
// The patched pod asks for exactly the same request.GPU per container as
// the original (kube/workload reads both), and each such container
// requests one tessera.io/gpu unit per GPU, which is what the node agent
// matches Allocate calls by. tessera.io/gpu-milli (limit and request, the
// container's compute share in thousandths over all its GPUs) is what a
// quota counts a share by: Kueue's pod integration and a namespace's
// ResourceQuota (requests.tessera.io/gpu-milli) count each pod on
// creation; no node advertises it and kubelet hands it to no device
// plugin.
func (h *Handler) Mutate(pod *corev1.Pod) ([]Operation, error) {
	if pod.Spec.SchedulerName != h.cfg.SchedulerName {
		return nil, nil
	}
	return h.mutatePod(pod, podAt{hasMetadata: true, hasAnnotations: len(pod.Annotations) > 0})
}

// podAt is where a pod, or a pod template, sits in the reviewed object.
type podAt struct {
	// root is the path of its metadata and spec: "" for a pod,
	// "/spec/template" for a Job's template.
	root string
	// hasMetadata and hasAnnotations tell whether the object has a
	// metadata object and a metadata.annotations object there to add to
	// (a pod and a Job's template always have metadata; a custom
	// resource's template may lack it).
	hasMetadata, hasAnnotations bool
}

// mutatePod is Mutate's, MutateJob's and the JobSet's patch: the
// translation of pod and, in each container with a compute share fixed
// before placement and no tessera.io/gpu-milli yet, tessera.io/gpu-milli
// (limit and request) equal to that share in thousandths over all its
// GPUs, as a JSON Patch of the pod where at places it, or nil when nothing
// changes.
func (h *Handler) mutatePod(pod *corev1.Pod, at podAt) ([]Operation, error) {
	t, patched, reqs, err := h.translate(pod)
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		idx := containerIndex(patched, r.Container)
		if idx < 0 || r.Convention != workload.Tessera || r.GPU.ComputeMilli == 0 || hasGPUMilli(patched.Spec.Containers[idx]) {
			continue // an existing value was checked by kube/workload
		}
		c := patched.Spec.Containers[idx]
		res := *c.Resources.DeepCopy()
		q := *resource.NewQuantity(int64(r.GPU.Count)*r.GPU.ComputeMilli, resource.DecimalSI)
		res.Limits[workload.ResourceGPUMilli] = q // tessera.io/gpu is there: limits exist
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		res.Requests[workload.ResourceGPUMilli] = q
		t.resources[idx] = res
	}
	if len(t.resources) == 0 && len(t.replaced) == 0 {
		return nil, nil
	}
	return t.operations(at), nil
}

func hasGPUMilli(c corev1.Container) bool {
	_, inLimits := c.Resources.Limits[workload.ResourceGPUMilli]
	_, inRequests := c.Resources.Requests[workload.ResourceGPUMilli]
	return inLimits || inRequests
}

// translate returns what Mutate changes in pod (of any scheduler), the
// pod so changed and its requests as kube/workload reads them; the
// translation is empty, and the pod pod itself, when pod asks for no GPU or
// through tessera.io/gpu already.
func (h *Handler) translate(pod *corev1.Pod) (*translation, *corev1.Pod, []workload.ContainerRequest, error) {
	before, err := workload.FromPod(pod, h.cfg.Catalog)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := workload.CheckGangKeys(pod); err != nil {
		return nil, nil, nil, err
	}
	t := translation{addAnn: map[string]string{}, resources: map[int]corev1.ResourceRequirements{}}
	if err := t.fromPodAnnotations(pod, before); err != nil {
		return nil, nil, nil, err
	}
	for _, r := range before {
		idx := containerIndex(pod, r.Container)
		if idx < 0 {
			return nil, nil, nil, fmt.Errorf("admission: kube/workload named container %q, which the pod does not have", r.Container)
		}
		switch r.Convention {
		case workload.KAI:
			err = t.fromKAI(pod, idx, r)
		case workload.NVIDIA, workload.HAMi, workload.Volcano:
			err = t.fromResources(pod, idx, r, len(before) == 1)
		case workload.Nvshare:
			err = t.fromNvshare(pod, idx, len(before) == 1)
		}
		if err != nil {
			return nil, nil, nil, err
		}
	}
	if len(t.resources) == 0 && len(t.replaced) == 0 {
		return &t, pod, before, nil
	}
	patched := t.apply(pod)
	// The scheduler and the agent must read the patched pod as the same
	// request; refuse rather than admit a pod they would disagree on.
	after, err := workload.FromPod(patched, h.cfg.Catalog)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("admission: the translated pod is invalid: %w", err)
	}
	if len(after) != len(before) {
		return nil, nil, nil, fmt.Errorf("admission: translating the pod changed its requests from %+v to %+v", before, after)
	}
	for i := range after {
		if after[i].Container != before[i].Container || after[i].Convention != workload.Tessera || !reflect.DeepEqual(after[i].GPU, before[i].GPU) ||
			after[i].Oversubscribe != before[i].Oversubscribe {
			return nil, nil, nil, fmt.Errorf("admission: translating container %s changed its request from %+v to %+v", before[i].Container, before[i], after[i])
		}
	}
	pb, _, _, _ := workload.PlacementPolicy(pod)
	if pa, _, _, err := workload.PlacementPolicy(patched); err != nil || pa != pb {
		return nil, nil, nil, fmt.Errorf("admission: translating the pod changed its placement policy from %q to %q (%v)", pb, pa, err)
	}
	return &t, patched, after, nil
}

// fromKAI moves KAI's pod annotations onto container idx (the pod's first).
func (t *translation) fromKAI(pod *corev1.Pod, idx int, r workload.ContainerRequest) error {
	for _, key := range tesseraAnnotationKeys() {
		for k := range pod.Annotations {
			if k == key || strings.HasPrefix(k, key+".") {
				return &workload.Error{Key: k, Message: "conflicts with KAI's gpu-fraction/gpu-memory annotations: use either those or Tessera's annotations with resource " + workload.ResourceGPU + ", not both"}
			}
		}
	}
	c := pod.Spec.Containers[idx]
	if err := checkRequests(c, nil); err != nil {
		return err
	}
	// KAI caps no compute: the share bursts to the whole GPU.
	t.addAnn[workload.AnnotationComputeLimit] = "1"
	for _, k := range kaiKeys() {
		v, ok := pod.Annotations[k.kai]
		if !ok {
			continue
		}
		t.removeAnn = append(t.removeAnn, k.kai)
		t.replaced = append(t.replaced, entry(k.kai, v))
		switch k.tessera {
		case "":
		case workload.AnnotationMemory:
			// KAI writes plain MiB; Tessera's key takes a quantity.
			t.addAnn[k.tessera] = fmt.Sprintf("%dMi", r.GPU.MemoryMiB)
		default:
			t.addAnn[k.tessera] = v
		}
	}
	t.resources[idx] = withGPUs(c.Resources, nil, r.GPU.Count)
	return nil
}

// fromResources replaces container idx's nvidia.com/gpu and HAMi resources
// by tessera.io/gpu and Tessera's annotations for that container
// (KEY.<container>; the plain KEY when the name makes the key too long and
// the container is the pod's only one with GPUs).
func (t *translation) fromResources(pod *corev1.Pod, idx int, r workload.ContainerRequest, only bool) error {
	c := pod.Spec.Containers[idx]
	if err := checkRequests(c, foreignResources()); err != nil {
		return err
	}
	lim := func(key string) (int64, bool) {
		if key == "" {
			return 0, false
		}
		q, ok := c.Resources.Limits[corev1.ResourceName(key)]
		if !ok {
			return 0, false
		}
		v, _ := q.AsInt64() // kube/workload checked the values
		return v, true
	}
	// The same fields kube/workload's HAMi (or Volcano) reading produces,
	// under Tessera's keys; Mutate checks that both read alike.
	_, memKey, pctKey, coresKey := vgpuResources(r.Convention)
	ann := map[string]string{}
	if r.GPU.MIGProfile != "" {
		// HAMi's vgpu-mode "mig": kube/workload chose the profile and the
		// models it is the smallest on.
		ann[workload.AnnotationMIGProfile] = r.GPU.MIGProfile
		ann[workload.AnnotationModel] = strings.Join(r.GPU.Models, ",")
		memKey, pctKey, coresKey = "", "", ""
	}
	cores, hasCores := lim(coresKey)
	if hasCores {
		ann[workload.AnnotationCompute] = fmt.Sprintf("%d%%", cores)
	}
	if mib, ok := lim(memKey); ok {
		ann[workload.AnnotationMemory] = fmt.Sprintf("%dMi", mib)
		if !hasCores {
			ann[workload.AnnotationComputeLimit] = "1"
		}
	}
	if pct, ok := lim(pctKey); ok {
		if hasCores {
			ann[workload.AnnotationMemory] = fmt.Sprintf("%d%%", pct) // a share of the GPU's memory
		} else {
			ann[workload.AnnotationCompute] = fmt.Sprintf("%d%%", pct)
			ann[workload.AnnotationComputeLimit] = "1"
		}
	}
	if err := t.containerAnnotations(c.Name, ann, only, foreignResources()[0]); err != nil {
		return err
	}
	for _, k := range foreignResources() {
		if v, ok := lim(k); ok { // whole numbers, as kube/workload checked
			t.replaced = append(t.replaced, fmt.Sprintf("%s:%s=%d", c.Name, k, v))
		}
	}
	t.resources[idx] = withGPUs(c.Resources, foreignResources(), r.GPU.Count)
	return nil
}

// containerAnnotations adds Tessera's annotations ann for container name
// (KEY.<container>; the plain KEY when the name makes the key too long and
// the container is the pod's only one with GPUs, only). blame is the
// resource a refusal names.
func (t *translation) containerAnnotations(name string, ann map[string]string, only bool, blame string) error {
	for _, k := range sortedKeys(ann) {
		v, key := ann[k], k+"."+name
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			if !only {
				return &workload.Error{Key: blame, Container: name,
					Message: fmt.Sprintf("cannot be translated: the container's Tessera annotation %s would be invalid (%s); shorten the container name", key, strings.Join(errs, "; "))}
			}
			key = k
		}
		t.addAnn[key] = v
	}
	return nil
}

// fromNvshare replaces container idx's nvshare.com/gpu (kube/workload
// allows only 1) by one tessera.io/gpu with the shares of
// workload.NvshareFields as the container's annotations, and asks for a
// node that oversubscribes memory (tessera.io/oversubscribe: "true").
func (t *translation) fromNvshare(pod *corev1.Pod, idx int, only bool) error {
	c := pod.Spec.Containers[idx]
	replaced := []string{workload.NvshareResourceGPU}
	if err := checkRequests(c, replaced); err != nil {
		return err
	}
	f := workload.NvshareFields()
	ann := map[string]string{
		workload.AnnotationCompute:      f[request.FieldCompute],
		workload.AnnotationComputeLimit: f[request.FieldComputeLimit],
		workload.AnnotationMemoryLimit:  f[request.FieldMemoryLimit],
	}
	if err := t.containerAnnotations(c.Name, ann, only, workload.NvshareResourceGPU); err != nil {
		return err
	}
	t.addAnn[workload.AnnotationOversubscribe] = "true"
	t.replaced = append(t.replaced, fmt.Sprintf("%s:%s=1", c.Name, workload.NvshareResourceGPU))
	t.resources[idx] = withGPUs(c.Resources, replaced, 1)
	return nil
}

// checkRequests refuses a container whose requests name a GPU resource
// that its limits do not (kube/workload reads limits only) or with another
// value: the API server would refuse such a pod (extended resources cannot
// be overcommitted), and the webhook must not make it valid by rewriting
// it. replaced are the resources that the translation replaces;
// tessera.io/gpu, which it sets, must not be requested at all.
func checkRequests(c corev1.Container, replaced []string) error {
	if _, ok := c.Resources.Requests[corev1.ResourceName(workload.ResourceGPU)]; ok {
		return &workload.Error{Key: workload.ResourceGPU, Container: c.Name, Message: "requested without a limit, while the container asks for GPUs another way: request GPUs one way"}
	}
	for _, k := range replaced {
		req, ok := c.Resources.Requests[corev1.ResourceName(k)]
		if !ok {
			continue
		}
		lim, ok := c.Resources.Limits[corev1.ResourceName(k)]
		if !ok {
			return &workload.Error{Key: k, Container: c.Name, Message: fmt.Sprintf("request %s has no limit; set the limit to the same value (extended resources cannot be overcommitted)", req.String())}
		}
		if req.Cmp(lim) != 0 {
			return &workload.Error{Key: k, Container: c.Name, Message: fmt.Sprintf("request %s must equal the limit %s (extended resources cannot be overcommitted)", req.String(), lim.String())}
		}
	}
	return nil
}

// apply returns a copy of pod with t applied, as the API server applies
// t's operations.
func (t *translation) apply(pod *corev1.Pod) *corev1.Pod {
	patched := pod.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	for _, k := range t.removeAnn {
		delete(patched.Annotations, k)
	}
	for k, v := range t.addAnnotations() {
		patched.Annotations[k] = v
	}
	for i, r := range t.resources {
		patched.Spec.Containers[i].Resources = r
	}
	return patched
}

// addAnnotations are the annotations t adds, with AnnotationMigratedFrom.
func (t *translation) addAnnotations() map[string]string {
	out := make(map[string]string, len(t.addAnn)+1)
	for k, v := range t.addAnn {
		out[k] = v
	}
	replaced := append([]string(nil), t.replaced...)
	sort.Strings(replaced)
	out[AnnotationMigratedFrom] = strings.Join(replaced, ",")
	return out
}

// operations writes t as a JSON Patch of the pod at, in a stable order. A
// translation that replaced no key (gpu-milli only) leaves the annotations
// alone.
func (t *translation) operations(at podAt) []Operation {
	root := at.root
	var ops []Operation
	for _, k := range t.removeAnn {
		ops = append(ops, Operation{Op: "remove", Path: root + "/metadata/annotations/" + escape(k)})
	}
	add := t.addAnnotations()
	switch {
	case len(t.replaced) == 0:
	case at.hasAnnotations:
		for _, k := range sortedKeys(add) {
			ops = append(ops, Operation{Op: "add", Path: root + "/metadata/annotations/" + escape(k), Value: add[k]})
		}
	case at.hasMetadata:
		ops = append(ops, Operation{Op: "add", Path: root + "/metadata/annotations", Value: add})
	default:
		ops = append(ops, Operation{Op: "add", Path: root + "/metadata", Value: map[string]map[string]string{"annotations": add}})
	}
	idxs := make([]int, 0, len(t.resources))
	for i := range t.resources {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	for _, i := range idxs {
		// The whole resources object is replaced, so the patch applies
		// whether or not the submitted pod spelled out resources, limits or
		// requests.
		ops = append(ops, Operation{Op: "add", Path: fmt.Sprintf("%s/spec/containers/%d/resources", root, i), Value: t.resources[i]})
	}
	return ops
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func containerIndex(pod *corev1.Pod, name string) int {
	for i, c := range pod.Spec.Containers {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// withGPUs returns a copy of r without the resources drop that requests n
// tessera.io/gpu (limit and request, as kubelet requires equal values for
// extended resources).
func withGPUs(r corev1.ResourceRequirements, drop []string, n int) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	q := *resource.NewQuantity(int64(n), resource.DecimalSI)
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	for _, k := range drop {
		delete(out.Limits, corev1.ResourceName(k))
		delete(out.Requests, corev1.ResourceName(k))
	}
	out.Limits[workload.ResourceGPU] = q
	out.Requests[workload.ResourceGPU] = q
	return out
}

// escape writes a map key as a JSON Pointer token (RFC 6901).
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
