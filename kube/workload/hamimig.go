package workload

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/catalog"
	"github.com/tessera-gpu/tessera/request"
)

// migMode reports whether the pod asks HAMi for MIG instances
// (nvidia.com/vgpu-mode: "mig").
func migMode(ann map[string]string) bool {
	return strings.TrimSpace(ann[HAMiAnnotationVGPUMode]) == "mig"
}

// hamiMIGFields translates a HAMi container of a pod in vgpu-mode "mig":
// nvidia.com/gpu MIG instances, each of the smallest profile that holds
// nvidia.com/gpumem MiB, as HAMi picks it (profiles ordered by memory, then
// compute slices; media-extended ones left out, HAMi never picks them).
//
// The request names one profile, and profile names differ between models
// (8000 MiB is 1g.10gb on an A100 or H100-SXM, 1g.12gb on an H100 NVL,
// 1g.18gb on an H200), while the pod usually names no model. So the
// request keeps the models (all of the catalog's, or those use-gputype and
// nouse-gputype allow, models) whose smallest profile is the same one, and
// a pod whose models disagree is refused with each model's profile: it must
// name the models (nvidia.com/use-gputype) whose profiles agree.
func hamiMIGFields(c corev1.Container, models, modelKey string, cat *catalog.Catalog) (map[string]string, map[string]string, error) {
	for _, key := range []string{HAMiResourceCores, HAMiResourceMemoryPercent} {
		if _, ok := c.Resources.Limits[corev1.ResourceName(key)]; ok {
			return nil, nil, &Error{Key: key, Container: c.Name, Message: fmt.Sprintf(`cannot be honoured with annotation %s "mig": a MIG instance fixes its own compute and memory; remove it and give %s (the MiB each instance must hold)`, HAMiAnnotationVGPUMode, HAMiResourceMemory)}
		}
	}
	n, err := count(c, ResourceNVIDIAGPU)
	if err != nil {
		return nil, nil, err
	}
	q, ok := c.Resources.Limits[HAMiResourceMemory]
	if !ok {
		return nil, nil, &Error{Key: HAMiAnnotationVGPUMode, Container: c.Name, Message: fmt.Sprintf(`"mig" needs resource %s in the container: the MiB each MIG instance must hold (the smallest profile holding it is chosen)`, HAMiResourceMemory)}
	}
	mib, ok := q.AsInt64()
	if !ok || mib < 1 {
		return nil, nil, &Error{Key: HAMiResourceMemory, Container: c.Name, Message: "must be a whole number of MiB >= 1, got " + q.String()}
	}
	if cat == nil {
		return nil, nil, &Error{Key: HAMiAnnotationVGPUMode, Container: c.Name, Message: `"mig" needs the GPU model catalog`}
	}
	allowed := cat.Models()
	if models != "" {
		allowed = allowed[:0]
		for _, name := range strings.Split(models, ",") {
			if m, ok := cat.Lookup(name); ok {
				allowed = append(allowed, m)
			}
		}
	}
	byProfile := map[string][]string{} // profile -> models whose smallest it is
	var largest []string
	for _, m := range allowed {
		if !m.SupportsMIG() {
			continue
		}
		p, ok := smallestMIGProfile(m, mib)
		if !ok {
			largest = append(largest, fmt.Sprintf("%s %dMi", m.Name, largestMIGMemory(m)))
			continue
		}
		byProfile[p.Name] = append(byProfile[p.Name], m.Name)
	}
	where := "the GPU models Tessera knows"
	if models != "" {
		where = fmt.Sprintf("the models %s allows (%s)", modelKey, models)
	}
	switch len(byProfile) {
	case 0:
		msg := fmt.Sprintf("%dMi with annotation %s \"mig\": no MIG profile of %s holds it", mib, HAMiAnnotationVGPUMode, where)
		if len(largest) > 0 {
			sort.Strings(largest)
			msg += " (the largest: " + strings.Join(largest, ", ") + ")"
		}
		return nil, nil, &Error{Key: HAMiResourceMemory, Container: c.Name, Message: msg}
	case 1:
		for p, ms := range byProfile {
			sort.Strings(ms)
			fields := map[string]string{request.FieldCount: fmt.Sprint(n), request.FieldMIGProfile: p, request.FieldModel: strings.Join(ms, ",")}
			keyOf := map[string]string{request.FieldCount: ResourceNVIDIAGPU, request.FieldMIGProfile: HAMiResourceMemory, request.FieldModel: HAMiAnnotationVGPUMode}
			if modelKey != "" {
				keyOf[request.FieldModel] = modelKey
			}
			return fields, keyOf, nil
		}
	}
	profiles := make([]string, 0, len(byProfile))
	for p, ms := range byProfile {
		sort.Strings(ms)
		profiles = append(profiles, p+" on "+strings.Join(ms, ", "))
	}
	sort.Strings(profiles)
	return nil, nil, &Error{Key: HAMiAnnotationVGPUMode, Container: c.Name, Message: fmt.Sprintf(
		`"mig" with %s %d: the smallest MIG profile holding it differs between %s (%s), and a Tessera request names one profile; name the models with annotation %s (models that share the profile), or ask %s with %s and %s`,
		HAMiResourceMemory, mib, where, strings.Join(profiles, "; "), HAMiAnnotationUseType, ResourceGPU, AnnotationMIGProfile, AnnotationModel)}
}

// smallestMIGProfile is the profile of m HAMi picks for mib MiB: the
// least memory that holds it, then the fewest compute slices; never a
// media-extended one.
func smallestMIGProfile(m catalog.Model, mib int64) (catalog.MIGProfile, bool) {
	var best catalog.MIGProfile
	found := false
	for _, p := range m.MIG.Profiles {
		if p.MediaExtended() || p.MemoryMiB < mib {
			continue
		}
		if !found || p.MemoryMiB < best.MemoryMiB || (p.MemoryMiB == best.MemoryMiB && p.ComputeSlices < best.ComputeSlices) {
			best, found = p, true
		}
	}
	return best, found
}

func largestMIGMemory(m catalog.Model) int64 {
	var most int64
	for _, p := range m.MIG.Profiles {
		most = max(most, p.MemoryMiB)
	}
	return most
}
