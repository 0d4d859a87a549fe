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
	Volcano Convention = "volcano"
	Nvshare Convention = "nvshare"
)

// ContainerRequest is one container's GPU request.
type ContainerRequest struct {
	Container  string
	GPU        request.GPU
	Convention Convention
	// Oversubscribe: the container must run on a node whose agent
	// oversubscribes GPU memory (tessera agent --oversubscribe). It is the
	// same for every GPU container of a pod: annotation
	// AnnotationOversubscribe, or nvshare.com/gpu in any container.
	Oversubscribe bool
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
	switch {
	case slices.Contains(gpuResourceKeys(), e.Key):
		where = "resource " + e.Key
	case e.Key == KAILabelQueue || e.Key == SchedulerPluginsLabelPodGroup:
		where = "label " + e.Key
	}
	if e.Container != "" {
		where += " of container " + e.Container
	}
	return where + ": " + e.Message
}

// FromPod returns the GPU requests of the pod's containers, in container
// order; containers that ask for no GPU are left out (and must be left
// untouched). A pod that asks for nothing returns nil, nil. Keys of other
// systems that Tessera cannot honour exactly are refused with an *Error
// that says what to write instead; none is ignored.
func FromPod(pod *corev1.Pod, cat *catalog.Catalog) ([]ContainerRequest, error) {
	for _, c := range pod.Spec.InitContainers {
		for _, key := range gpuResourceKeys() {
			if _, ok := c.Resources.Limits[corev1.ResourceName(key)]; ok {
				return nil, &Error{Key: key, Container: c.Name, Message: "GPUs for init containers are not supported; request them in a regular container"}
			}
		}
	}
	if err := refusedAnnotations(pod.Annotations); err != nil {
		return nil, err
	}
	kai := hasAny(pod.Annotations, KAIAnnotationFraction, KAIAnnotationMemory, KAIAnnotationNumDevices)
	kaiIdx, err := kaiContainer(pod, kai)
	if err != nil {
		return nil, err
	}
	models, modelKey, err := hamiModels(pod.Annotations, cat)
	if err != nil {
		return nil, err
	}
	over, overSet, err := oversubscribe(pod.Annotations)
	if err != nil {
		return nil, err
	}
	mig := migMode(pod.Annotations)
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
		if mig && conv == NVIDIA {
			return nil, &Error{Key: HAMiAnnotationVGPUMode, Container: c.Name, Message: fmt.Sprintf(`"mig" needs resource %s beside %s: the MiB each MIG instance must hold (the smallest profile holding it is chosen)`, HAMiResourceMemory, ResourceNVIDIAGPU)}
		}
		if mig && conv != "" && conv != HAMi {
			return nil, &Error{Key: HAMiAnnotationVGPUMode, Container: c.Name, Message: fmt.Sprintf(`"mig" applies to HAMi's resources: ask %s with %s (the MiB each MIG instance must hold), not %s`, ResourceNVIDIAGPU, HAMiResourceMemory, conventionKey(conv))}
		}
		var fields, keyOf map[string]string
		switch {
		case conv == HAMi && mig:
			fields, keyOf, err = hamiMIGFields(c, models, modelKey, cat)
		case conv == Tessera:
			fields, keyOf, err = tesseraFields(pod, c)
		case conv == NVIDIA:
			fields, keyOf, err = nvidiaFields(pod, c)
		case conv == HAMi:
			fields, keyOf, err = vgpuFields(pod, c, hamiKeys())
		case conv == Volcano:
			fields, keyOf, err = vgpuFields(pod, c, volcanoKeys())
		case conv == Nvshare:
			fields, keyOf, err = nvshareFields(pod, c)
		case kai && i == kaiIdx:
			conv = KAI
			fields, keyOf, err = kaiFields(pod)
		default:
			if hasGPUMilli(c) {
				return nil, &Error{Key: ResourceGPUMilli, Container: c.Name, Message: "counts the share of the container's " + ResourceGPU + " for quotas: add resources.limits[" + ResourceGPU + "] to the container, or remove it"}
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if modelKey != "" {
			if conv == Tessera {
				return nil, &Error{Key: modelKey, Container: c.Name, Message: "conflicts with resource " + ResourceGPU + ": write the models as annotation " + AnnotationModel + " instead"}
			}
			if _, narrowed := fields[request.FieldModel]; !narrowed { // a MIG request narrows them itself
				fields[request.FieldModel], keyOf[request.FieldModel] = models, modelKey
			}
		}
		r, err := parse(c.Name, conv, fields, keyOf, cat)
		if err != nil {
			return nil, err
		}
		if err := checkGPUMilli(c, r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for _, r := range out {
		if r.Convention != Nvshare {
			continue
		}
		if overSet && !over {
			return nil, &Error{Key: AnnotationOversubscribe, Message: `"false" conflicts with resource ` + NvshareResourceGPU + " of container " + r.Container +
				", which needs a node that oversubscribes GPU memory; remove the annotation"}
		}
		over = true
	}
	for i := range out {
		out[i].Oversubscribe = over
	}
	if len(out) == 0 {
		if overSet {
			return nil, &Error{Key: AnnotationOversubscribe, Message: "set, but no container requests a GPU; add resources.limits[" + ResourceGPU + "] to the container that needs GPUs"}
		}
		if key, ok := firstTesseraAnnotation(pod.Annotations); ok {
			return nil, &Error{Key: key, Message: "set, but no container requests " + ResourceGPU + "; add resources.limits[" + ResourceGPU + "] to the container that needs GPUs"}
		}
		if key := firstKey(pod.Annotations, HAMiAnnotationUseType, HAMiAnnotationNoUseType); key != "" {
			return nil, &Error{Key: key, Message: "set, but no container requests a GPU; add resources.limits[nvidia.com/gpu] to the container that needs GPUs"}
		}
	}
	return out, nil
}

// GPUResources are the container resource names that ask for GPUs, in
// every convention FromPod accepts, and ResourceGPUMilli, which counts
// them for quotas: Tessera places them, not the node's extended-resource
// counts.
func GPUResources() []string { return gpuResourceKeys() }

func gpuResourceKeys() []string {
	return []string{ResourceGPU, ResourceGPUMilli, ResourceNVIDIAGPU, HAMiResourceMemory, HAMiResourceMemoryPercent, HAMiResourceCores,
		VolcanoResourceNumber, VolcanoResourceMemory, VolcanoResourceMemoryPercent, VolcanoResourceCores, NvshareResourceGPU}
}

// vgpuKeys are the resource names of a HAMi-style convention (HAMi's own,
// or Volcano's vGPU plugin, which is HAMi's renamed).
type vgpuKeys struct {
	conv                          Convention
	count, memory, percent, cores string
}

func hamiKeys() vgpuKeys {
	return vgpuKeys{HAMi, ResourceNVIDIAGPU, HAMiResourceMemory, HAMiResourceMemoryPercent, HAMiResourceCores}
}

func volcanoKeys() vgpuKeys {
	return vgpuKeys{Volcano, VolcanoResourceNumber, VolcanoResourceMemory, VolcanoResourceMemoryPercent, VolcanoResourceCores}
}

// convention tells which convention a container's resources follow.
func convention(c corev1.Container) (Convention, error) {
	has := func(k string) bool { _, ok := c.Resources.Limits[corev1.ResourceName(k)]; return ok }
	hami := has(HAMiResourceMemory) || has(HAMiResourceMemoryPercent) || has(HAMiResourceCores)
	volcano := has(VolcanoResourceNumber) || has(VolcanoResourceMemory) || has(VolcanoResourceMemoryPercent) || has(VolcanoResourceCores)
	switch {
	case has(NvshareResourceGPU) && (volcano || hami || has(ResourceGPU) || has(ResourceNVIDIAGPU)):
		return "", &Error{Key: NvshareResourceGPU, Container: c.Name, Message: "conflicts with the container's other GPU resources: request GPUs one way"}
	case has(NvshareResourceGPU):
		return Nvshare, nil
	case volcano && (has(ResourceGPU) || has(ResourceNVIDIAGPU) || hami):
		return "", &Error{Key: VolcanoResourceNumber, Container: c.Name, Message: "conflicts with the container's other GPU resources: request GPUs one way"}
	case volcano && !has(VolcanoResourceNumber):
		return "", &Error{Key: firstPresent(has, VolcanoResourceMemory, VolcanoResourceMemoryPercent, VolcanoResourceCores), Container: c.Name, Message: "needs " + VolcanoResourceNumber + " in the same container (the number of GPUs)"}
	case volcano:
		return Volcano, nil
	case has(ResourceGPU) && (has(ResourceNVIDIAGPU) || hami):
		other := ResourceNVIDIAGPU
		if hami {
			other = "nvidia.com/gpumem, gpumem-percentage and gpucores"
		}
		return "", &Error{Key: ResourceGPU, Container: c.Name, Message: "conflicts with " + other + ": request GPUs one way"}
	case has(ResourceGPU):
		return Tessera, nil
	case hami && !has(ResourceNVIDIAGPU):
		return "", &Error{Key: firstPresent(has, HAMiResourceMemory, HAMiResourceMemoryPercent, HAMiResourceCores), Container: c.Name, Message: "needs " + ResourceNVIDIAGPU + " in the same container (the number of GPUs)"}
	case hami:
		return HAMi, nil
	case has(ResourceNVIDIAGPU):
		return NVIDIA, nil
	}
	return "", nil
}

func firstPresent(has func(string) bool, keys ...string) string {
	for _, k := range keys {
		if has(k) {
			return k
		}
	}
	return keys[0]
}

func conventionKey(c Convention) string {
	switch c {
	case Tessera:
		return ResourceGPU
	case HAMi:
		return HAMiResourceMemory
	case Volcano:
		return VolcanoResourceNumber
	case Nvshare:
		return NvshareResourceGPU
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

func tesseraFields(pod *corev1.Pod, c corev1.Container) (map[string]string, map[string]string, error) {
	n, err := count(c, ResourceGPU)
	if err != nil {
		return nil, nil, err
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
	return fields, keyOf, nil
}

func nvidiaFields(pod *corev1.Pod, c corev1.Container) (map[string]string, map[string]string, error) {
	if key, ok := firstTesseraAnnotation(pod.Annotations); ok {
		return nil, nil, &Error{Key: key, Container: c.Name, Message: "conflicts with resource " + ResourceNVIDIAGPU + ": Tessera annotations apply to " + ResourceGPU + "; request " + ResourceGPU + " instead"}
	}
	n, err := count(c, ResourceNVIDIAGPU)
	if err != nil {
		return nil, nil, err
	}
	return map[string]string{request.FieldCount: fmt.Sprint(n)}, map[string]string{request.FieldCount: ResourceNVIDIAGPU}, nil
}

// kaiContainer returns the index of the container KAI's annotations apply
// to: the one gpu-fraction-container-name names, else the first; -1 when
// the pod has no KAI request.
func kaiContainer(pod *corev1.Pod, kai bool) (int, error) {
	name, named := pod.Annotations[KAIAnnotationContainerName]
	switch {
	case named && !kai:
		return -1, &Error{Key: KAIAnnotationContainerName, Message: "needs gpu-fraction or gpu-memory (it names the container that gets them)"}
	case !kai:
		return -1, nil
	case !named:
		return 0, nil
	}
	for i, c := range pod.Spec.Containers {
		if c.Name == name {
			return i, nil
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return -1, &Error{Key: KAIAnnotationContainerName, Message: fmt.Sprintf("names init container %s: Tessera gives GPUs to regular containers only; move the GPU work into a regular container and name it", name)}
		}
	}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	return -1, &Error{Key: KAIAnnotationContainerName, Message: fmt.Sprintf("must name one of the pod's containers (%s), got %q", strings.Join(names, ", "), name)}
}

// kaiFields translates gpu-fraction (a share of one GPU's memory, with the
// same share of compute for placement), gpu-memory (MiB of one GPU) and
// gpu-fraction-num-devices (how many GPUs get that share). KAI caps no
// compute: the limit is the whole GPU.
func kaiFields(pod *corev1.Pod) (map[string]string, map[string]string, error) {
	fields := map[string]string{}
	keyOf := map[string]string{}
	frac, hasFrac := pod.Annotations[KAIAnnotationFraction]
	mem, hasMem := pod.Annotations[KAIAnnotationMemory]
	if hasFrac && hasMem {
		return nil, nil, &Error{Key: KAIAnnotationMemory, Message: "conflicts with gpu-fraction: set one of them"}
	}
	if hasFrac {
		fields[request.FieldCompute], keyOf[request.FieldCompute] = frac, KAIAnnotationFraction
		fields[request.FieldComputeLimit], keyOf[request.FieldComputeLimit] = "1", KAIAnnotationFraction
	}
	if hasMem {
		mib, err := plainMiB(KAIAnnotationMemory, mem)
		if err != nil {
			return nil, nil, err
		}
		fields[request.FieldMemory], keyOf[request.FieldMemory] = mib, KAIAnnotationMemory
		fields[request.FieldComputeLimit], keyOf[request.FieldComputeLimit] = "1", KAIAnnotationMemory
	}
	if !hasFrac && !hasMem {
		return nil, nil, &Error{Key: KAIAnnotationNumDevices, Message: "needs gpu-fraction or gpu-memory"}
	}
	if v, ok := pod.Annotations[KAIAnnotationNumDevices]; ok {
		fields[request.FieldCount], keyOf[request.FieldCount] = v, KAIAnnotationNumDevices
	}
	return fields, keyOf, nil
}

// vgpuFields translates HAMi's resources (or Volcano's vGPU ones, the same
// under other names): the count, memory in MiB per GPU, a memory
// percentage and a compute percentage (gpucores, a cap). HAMi has no
// guarantee/limit split: cores become both; without cores a container may
// use the whole GPU's compute, so its guarantee follows its memory and its
// limit is the whole GPU. A memory percentage with cores is a share of the
// GPU's memory apart from the compute share.
func vgpuFields(pod *corev1.Pod, c corev1.Container, k vgpuKeys) (map[string]string, map[string]string, error) {
	if key, ok := firstTesseraAnnotation(pod.Annotations); ok {
		return nil, nil, &Error{Key: key, Container: c.Name, Message: fmt.Sprintf("conflicts with resource %s: use either %s's resources or Tessera annotations with %s", k.count, k.conv, ResourceGPU)}
	}
	n, err := count(c, k.count)
	if err != nil {
		return nil, nil, err
	}
	fields := map[string]string{request.FieldCount: fmt.Sprint(n)}
	keyOf := map[string]string{request.FieldCount: k.count}
	lim := func(key string) (resource.Quantity, bool) {
		q, ok := c.Resources.Limits[corev1.ResourceName(key)]
		return q, ok
	}
	cores, hasCores := lim(k.cores)
	memQ, hasMem := lim(k.memory)
	pctQ, hasPct := lim(k.percent)
	if hasMem && hasPct {
		return nil, nil, &Error{Key: k.percent, Container: c.Name, Message: "conflicts with " + k.memory + ": set one of them"}
	}
	if hasCores {
		pct, err := percent(c.Name, k.cores, cores)
		if err != nil {
			return nil, nil, err
		}
		fields[request.FieldCompute], keyOf[request.FieldCompute] = pct, k.cores
	}
	switch {
	case hasMem:
		mib, ok := memQ.AsInt64()
		if !ok || mib < 1 {
			return nil, nil, &Error{Key: k.memory, Container: c.Name, Message: "must be a whole number of MiB >= 1, got " + memQ.String()}
		}
		fields[request.FieldMemory], keyOf[request.FieldMemory] = fmt.Sprintf("%dMi", mib), k.memory
		if !hasCores {
			fields[request.FieldComputeLimit], keyOf[request.FieldComputeLimit] = "1", k.memory
		}
	case hasPct:
		pct, err := percent(c.Name, k.percent, pctQ)
		if err != nil {
			return nil, nil, err
		}
		if hasCores {
			// A share of the chosen GPU's memory, apart from the compute share.
			fields[request.FieldMemory], keyOf[request.FieldMemory] = pct, k.percent
		} else {
			// Compute follows the memory share and bursts to the whole GPU.
			fields[request.FieldCompute], keyOf[request.FieldCompute] = pct, k.percent
			fields[request.FieldComputeLimit], keyOf[request.FieldComputeLimit] = "1", k.percent
		}
	}
	return fields, keyOf, nil
}

// nvshareFields translates nvshare.com/gpu: 1, one of the virtual GPUs
// nvshare's device plugin makes of a node's one GPU (10 by default): the
// whole card's memory through managed memory, with no guarantee, taking
// turns on the GPU while the working sets do not fit (NvshareFields). The
// pod must also land on a node that oversubscribes memory (FromPod sets
// Oversubscribe).
func nvshareFields(pod *corev1.Pod, c corev1.Container) (map[string]string, map[string]string, error) {
	if key, ok := firstTesseraAnnotation(pod.Annotations); ok {
		return nil, nil, &Error{Key: key, Container: c.Name, Message: "conflicts with resource " + NvshareResourceGPU + ": use either nvshare's resource or Tessera annotations with " + ResourceGPU}
	}
	q := c.Resources.Limits[NvshareResourceGPU]
	if n, ok := q.AsInt64(); !ok || n != 1 {
		return nil, nil, &Error{Key: NvshareResourceGPU, Container: c.Name, Message: "must be 1, got " + q.String() +
			": nvshare hands a container the node's one GPU whatever the count; write 1, or resources.limits[" + ResourceGPU + "]: N for N GPUs"}
	}
	fields := NvshareFields()
	keyOf := map[string]string{}
	for f := range fields {
		keyOf[f] = NvshareResourceGPU
	}
	return fields, keyOf, nil
}

// NvshareFields is the request nvshare.com/gpu: 1 becomes, as request
// fields: one GPU; a guaranteed tenth of its compute (nvshare guarantees
// nothing; a tenth packs at most nvshare's default of 10 virtual GPUs on
// a GPU, and its memory, also a tenth, is what placement books); a limit
// of the whole GPU's compute and memory (each pod sees the whole card).
func NvshareFields() map[string]string {
	return map[string]string{
		request.FieldCount: "1", request.FieldCompute: "0.1", request.FieldComputeLimit: "1", request.FieldMemoryLimit: "100%",
	}
}

// oversubscribe reads annotation AnnotationOversubscribe: its value, and
// whether it is set.
func oversubscribe(ann map[string]string) (on, set bool, err error) {
	v, ok := ann[AnnotationOversubscribe]
	if !ok {
		return false, false, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, &Error{Key: AnnotationOversubscribe, Message: fmt.Sprintf(`must be "true" (only nodes whose agent runs with --oversubscribe) or "false", got %q`, v)}
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

func hasGPUMilli(c corev1.Container) bool {
	_, inLimits := c.Resources.Limits[ResourceGPUMilli]
	_, inRequests := c.Resources.Requests[ResourceGPUMilli]
	return inLimits || inRequests
}

// checkGPUMilli refuses a tessera.io/gpu-milli that is not the share the
// container's request books: a quota counting it would count a lie.
func checkGPUMilli(c corev1.Container, r ContainerRequest) error {
	if !hasGPUMilli(c) {
		return nil
	}
	if r.Convention != Tessera {
		return &Error{Key: ResourceGPUMilli, Container: c.Name, Message: "counts the share of " + ResourceGPU + " for quotas: write the container's GPUs as " + ResourceGPU + " to use it"}
	}
	if r.GPU.ComputeMilli == 0 {
		return &Error{Key: ResourceGPUMilli, Container: c.Name, Message: "needs a compute share fixed before placement: set " + AnnotationCompute + " (a share in proportion to memory is known only on the chosen GPU)"}
	}
	want := int64(r.GPU.Count) * r.GPU.ComputeMilli
	for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		q, ok := l[ResourceGPUMilli]
		if !ok {
			continue
		}
		if v, exact := q.AsInt64(); !exact || v != want {
			return &Error{Key: ResourceGPUMilli, Container: c.Name, Message: fmt.Sprintf("must equal the thousandths of GPU compute the container asks, %d (%d GPUs x %d), got %s", want, r.GPU.Count, r.GPU.ComputeMilli, q.String())}
		}
	}
	return nil
}
