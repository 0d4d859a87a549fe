package workload

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/request"
)

// Convention names where a container's request came from.
type Convention string

// Conventions a pod may use.
const (
	Tessera Convention = "tessera"
	NVIDIA  Convention = "nvidia.com/gpu"
	KAI     Convention = "kai"
	HAMi    Convention = "hami"
)

// ContainerRequest is one container's GPU request.
type ContainerRequest struct {
	Container  string
	GPU        request.GPU
	Convention Convention
}

// Error is a problem with a pod's GPU request: Key is the pod's own key (an
// annotation or a resource name), Container the container it concerns ("" for
// the whole pod).
type Error struct {
	Key       string
	Container string
	Message   string
}

func (e *Error) Error() string {
	where := "annotation " + e.Key
	if slices.Contains(gpuResourceKeys(), e.Key) {
		where = "resource " + e.Key
	}
	if e.Container != "" {
		where += " of container " + e.Container
	}
	return where + ": " + e.Message
}

// FromPod returns the GPU requests of the pod's containers, in container
// order; containers that ask for no GPU are left out (and must be left
// untouched). A pod that asks for nothing returns nil, nil.
func FromPod(pod *corev1.Pod, cat *catalog.Catalog) ([]ContainerRequest, error) {
	for _, c := range pod.Spec.InitContainers {
		for _, key := range gpuResourceKeys() {
			if _, ok := c.Resources.Limits[corev1.ResourceName(key)]; ok {
				return nil, &Error{Key: key, Container: c.Name, Message: "GPUs for init containers are not supported; request them in a regular container"}
			}
		}
	}
	kai := hasAny(pod.Annotations, KAIAnnotationFraction, KAIAnnotationMemory, KAIAnnotationNumDevices)
	var out []ContainerRequest
	for i, c := range pod.Spec.Containers {
		conv, err := convention(c)
		if err != nil {
			return nil, err
		}
		if kai && conv != "" {
			return nil, &Error{Key: KAIAnnotationFraction, Container: c.Name,
				Message: fmt.Sprintf("conflicts with resource %s: use either KAI's gpu-fraction/gpu-memory annotations or GPU resources, not both", conventionKey(conv))}
		}
		var r ContainerRequest
		switch {
		case conv == Tessera:
			r, err = fromTessera(pod, c, cat)
		case conv == NVIDIA:
			r, err = fromNVIDIA(pod, c, cat)
		case conv == HAMi:
			r, err = fromHAMi(pod, c, cat)
		case kai && i == 0:
			// KAI applies its annotations to the pod's first container.
			r, err = fromKAI(pod, c, cat)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		if key, ok := firstTesseraAnnotation(pod.Annotations); ok {
			return nil, &Error{Key: key, Message: "set, but no container requests " + ResourceGPU + "; add resources.limits[" + ResourceGPU + "] to the container that needs GPUs"}
		}
	}
	return out, nil
}

func gpuResourceKeys() []string {
	return []string{ResourceGPU, ResourceNVIDIAGPU, HAMiResourceMemory, HAMiResourceMemoryPercent, HAMiResourceCores}
}

// convention tells which convention a container's resources follow.
func convention(c corev1.Container) (Convention, error) {
	has := func(k string) bool { _, ok := c.Resources.Limits[corev1.ResourceName(k)]; return ok }
	hami := has(HAMiResourceMemory) || has(HAMiResourceMemoryPercent) || has(HAMiResourceCores)
	switch {
	case has(ResourceGPU) && (has(ResourceNVIDIAGPU) || hami):
		other := ResourceNVIDIAGPU
		if hami {
			other = "nvidia.com/gpumem, gpumem-percentage and gpucores"
		}
		return "", &Error{Key: ResourceGPU, Container: c.Name, Message: "conflicts with " + other + ": request GPUs one way"}
	case has(ResourceGPU):
		return Tessera, nil
	case hami && !has(ResourceNVIDIAGPU):
		return "", &Error{Key: HAMiResourceMemory, Container: c.Name, Message: "needs " + ResourceNVIDIAGPU + " in the same container (the number of GPUs)"}
	case hami:
		return HAMi, nil
	case has(ResourceNVIDIAGPU):
		return NVIDIA, nil
	}
	return "", nil
}

func conventionKey(c Convention) string {
	switch c {
	case Tessera:
		return ResourceGPU
	case HAMi:
		return HAMiResourceMemory
	}
	return ResourceNVIDIAGPU
}

// count reads a GPU-count resource: a whole number in [1, MaxCount].
func count(c corev1.Container, key string) (int, error) {
	q := c.Resources.Limits[corev1.ResourceName(key)]
	n, ok := q.AsInt64()
	if !ok || n < 1 || n > request.MaxCount {
		return 0, &Error{Key: key, Container: c.Name, Message: fmt.Sprintf("must be a whole number in [1, %d], got %s", request.MaxCount, q.String())}
	}
	return int(n), nil
}

func fromTessera(pod *corev1.Pod, c corev1.Container, cat *catalog.Catalog) (ContainerRequest, error) {
	n, err := count(c, ResourceGPU)
	if err != nil {
		return ContainerRequest{}, err
	}
	fields := map[string]string{request.FieldCount: fmt.Sprint(n)}
	keyOf := map[string]string{request.FieldCount: ResourceGPU}
	for _, af := range annotationFields() {
		key := af.key
		v, ok := pod.Annotations[key+"."+c.Name]
		if ok {
			key += "." + c.Name
		} else {
			v, ok = pod.Annotations[key]
		}
		if ok {
			fields[af.field] = v
			keyOf[af.field] = key
		}
	}
	return parse(c.Name, Tessera, fields, keyOf, cat)
}

func fromNVIDIA(pod *corev1.Pod, c corev1.Container, cat *catalog.Catalog) (ContainerRequest, error) {
	if key, ok := firstTesseraAnnotation(pod.Annotations); ok {
		return ContainerRequest{}, &Error{Key: key, Container: c.Name, Message: "conflicts with resource " + ResourceNVIDIAGPU + ": Tessera annotations apply to " + ResourceGPU + "; request " + ResourceGPU + " instead"}
	}
	n, err := count(c, ResourceNVIDIAGPU)
	if err != nil {
		return ContainerRequest{}, err
	}
	return parse(c.Name, NVIDIA, map[string]string{request.FieldCount: fmt.Sprint(n)}, map[string]string{request.FieldCount: ResourceNVIDIAGPU}, cat)
}

// fromKAI translates gpu-fraction (a share of one GPU), gpu-memory (MiB of
// one GPU) and gpu-fraction-num-devices (how many GPUs get that share).
func fromKAI(pod *corev1.Pod, c corev1.Container, cat *catalog.Catalog) (ContainerRequest, error) {
	fields := map[string]string{}
	keyOf := map[string]string{}
	frac, hasFrac := pod.Annotations[KAIAnnotationFraction]
	mem, hasMem := pod.Annotations[KAIAnnotationMemory]
	if hasFrac && hasMem {
		return ContainerRequest{}, &Error{Key: KAIAnnotationMemory, Message: "conflicts with gpu-fraction: set one of them"}
	}
	if hasFrac {
		fields[request.FieldCompute], keyOf[request.FieldCompute] = frac, KAIAnnotationFraction
	}
	if hasMem {
		mib, err := plainMiB(KAIAnnotationMemory, mem)
		if err != nil {
			return ContainerRequest{}, err
		}
		fields[request.FieldMemory], keyOf[request.FieldMemory] = mib, KAIAnnotationMemory
	}
	if !hasFrac && !hasMem {
		return ContainerRequest{}, &Error{Key: KAIAnnotationNumDevices, Message: "needs gpu-fraction or gpu-memory"}
	}
	if v, ok := pod.Annotations[KAIAnnotationNumDevices]; ok {
		fields[request.FieldCount], keyOf[request.FieldCount] = v, KAIAnnotationNumDevices
	}
	return parse(c.Name, KAI, fields, keyOf, cat)
}

// fromHAMi translates nvidia.com/gpu (count), gpumem (MiB per GPU),
// gpumem-percentage and gpucores (a compute cap in percent). HAMi has no
// guarantee/limit split: gpucores becomes both; without gpucores a
// container may use the whole GPU's compute, so its guarantee follows its
// memory and its limit is the whole GPU.
func fromHAMi(pod *corev1.Pod, c corev1.Container, cat *catalog.Catalog) (ContainerRequest, error) {
	if key, ok := firstTesseraAnnotation(pod.Annotations); ok {
		return ContainerRequest{}, &Error{Key: key, Container: c.Name, Message: "conflicts with HAMi resources: use either nvidia.com/gpumem and gpucores or Tessera annotations"}
	}
	n, err := count(c, ResourceNVIDIAGPU)
	if err != nil {
		return ContainerRequest{}, err
	}
	fields := map[string]string{request.FieldCount: fmt.Sprint(n)}
	keyOf := map[string]string{request.FieldCount: ResourceNVIDIAGPU}
	lim := func(k string) (resource.Quantity, bool) {
		q, ok := c.Resources.Limits[corev1.ResourceName(k)]
		return q, ok
	}
	cores, hasCores := lim(HAMiResourceCores)
	memQ, hasMem := lim(HAMiResourceMemory)
	pctQ, hasPct := lim(HAMiResourceMemoryPercent)
	if hasMem && hasPct {
		return ContainerRequest{}, &Error{Key: HAMiResourceMemoryPercent, Container: c.Name, Message: "conflicts with nvidia.com/gpumem: set one of them"}
	}
	if hasCores {
		pct, err := percent(c.Name, HAMiResourceCores, cores)
		if err != nil {
			return ContainerRequest{}, err
		}
		fields[request.FieldCompute], keyOf[request.FieldCompute] = pct, HAMiResourceCores
	}
	switch {
	case hasMem:
		mib, ok := memQ.AsInt64()
		if !ok || mib < 1 {
			return ContainerRequest{}, &Error{Key: HAMiResourceMemory, Container: c.Name, Message: "must be a whole number of MiB >= 1, got " + memQ.String()}
		}
		fields[request.FieldMemory], keyOf[request.FieldMemory] = fmt.Sprintf("%dMi", mib), HAMiResourceMemory
	case hasPct:
		pct, err := percent(c.Name, HAMiResourceMemoryPercent, pctQ)
		if err != nil {
			return ContainerRequest{}, err
		}
		// A memory percentage is a share of whichever GPU is chosen; Tessera
		// expresses that as memory in proportion to a compute share.
		if hasCores && fields[request.FieldCompute] != pct {
			return ContainerRequest{}, &Error{Key: HAMiResourceMemoryPercent, Container: c.Name, Message: "must equal nvidia.com/gpucores when both are set (Tessera ties a percentage of memory to the same share of compute); use nvidia.com/gpumem in MiB instead"}
		}
		fields[request.FieldCompute], keyOf[request.FieldCompute] = pct, HAMiResourceMemoryPercent
		if !hasCores {
			fields[request.FieldComputeLimit], keyOf[request.FieldComputeLimit] = "1", HAMiResourceMemoryPercent
		}
	}
	if !hasCores && hasMem {
		fields[request.FieldComputeLimit], keyOf[request.FieldComputeLimit] = "1", HAMiResourceMemory
	}
	return parse(c.Name, HAMi, fields, keyOf, cat)
}

// percent reads a whole percentage in [1, 100] and returns it as a share string.
func percent(container, key string, q resource.Quantity) (string, error) {
	v, ok := q.AsInt64()
	if !ok || v < 1 || v > 100 {
		return "", &Error{Key: key, Container: container, Message: "must be a whole percentage in [1, 100], got " + q.String()}
	}
	return fmt.Sprintf("%d%%", v), nil
}

// plainMiB reads a KAI memory annotation: a whole number of MiB.
func plainMiB(key, v string) (string, error) {
	m, err := quantity.ParseBytes(strings.TrimSpace(v))
	if err != nil || m < 1 || strings.ContainsAny(v, "KMGTPkiE.e") {
		return "", &Error{Key: key, Message: fmt.Sprintf("must be a whole number of MiB >= 1 (e.g. 2000), got %q", v)}
	}
	return fmt.Sprintf("%dMi", m), nil
}

// parse validates fields with the shared request parser and reports errors
// under the pod's own key.
func parse(container string, conv Convention, fields, keyOf map[string]string, cat *catalog.Catalog) (ContainerRequest, error) {
	r, err := request.Parse(fields, cat)
	if err != nil {
		var fe *request.FieldError
		if errors.As(err, &fe) {
			key := keyOf[fe.Field]
			if key == "" {
				key = keyFor(fe.Field)
			}
			msg := strings.TrimPrefix(fe.Error(), fe.Field+": ")
			return ContainerRequest{}, &Error{Key: key, Container: container, Message: msg}
		}
		return ContainerRequest{}, &Error{Key: ResourceGPU, Container: container, Message: err.Error()}
	}
	return ContainerRequest{Container: container, GPU: r, Convention: conv}, nil
}

// keyFor names the Tessera annotation of a request field that the pod did
// not set itself (a check between fields may blame it).
func keyFor(field string) string {
	for _, af := range annotationFields() {
		if af.field == field {
			return af.key
		}
	}
	return ResourceGPU
}

func firstTesseraAnnotation(ann map[string]string) (string, bool) {
	for _, af := range annotationFields() {
		for k := range ann {
			if k == af.key || strings.HasPrefix(k, af.key+".") {
				return k, true
			}
		}
	}
	return "", false
}

func hasAny(m map[string]string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
