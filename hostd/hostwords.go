package hostd

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/placement"
	"github.com/tessera-gpu/tessera/quantity"
	"github.com/tessera-gpu/tessera/request"
)

// Submissions are checked against this host's GPUs and reported in the
// host's words: the `tessera run` flag of each field, the value given and
// what this host allows (its GPUs, models, memory and MIG profiles),
// never the placement engine's words (pods, nodes, milli-GPUs). Where the
// engine decides (can this request ever fit the idle host?), its
// structured rejection (placement.Rejection) is translated here; the
// engine's decisions are not changed.

// FlagOf is the `tessera run` flag that sets a submission field (a
// request field, or "queue", "priority", "intercept-lib", "command"); the
// field itself when no flag sets it.
func FlagOf(field string) string {
	switch field {
	case request.FieldCount:
		return "--gpus"
	case request.FieldCompute:
		return "--gpu-fraction"
	case request.FieldComputeLimit:
		return "--gpu-limit"
	case request.FieldMemory:
		return "--gpu-memory"
	case request.FieldMemoryLimit:
		return "--gpu-memory-limit"
	case request.FieldModel:
		return "--model"
	case request.FieldMIGProfile:
		return "--mig"
	case "queue", "priority", "intercept-lib":
		return "--" + field
	case "gpu":
		return "GPU request"
	}
	return strings.TrimSpace(field)
}

// modelGroup is the GPUs of one model on this host.
type modelGroup struct {
	model string
	count int
	// memMiB is the largest memory of one of them (free when the daemon
	// started, for the idle host; the GPU's whole memory for limits).
	memMiB int64
}

// hostGroups groups the GPUs of the idle host that keep passes by model,
// largest memory first. free selects each GPU's memory free at start
// rather than its whole memory.
func (d *Daemon) hostGroups(keep func(g *placement.GPU) bool, free bool) []modelGroup {
	var out []modelGroup
	for ni := range d.empty.Nodes {
		for gi := range d.empty.Nodes[ni].GPUs {
			g := &d.empty.Nodes[ni].GPUs[gi]
			if keep != nil && !keep(g) {
				continue
			}
			mem := g.MemoryMiB
			if free {
				mem = g.FreeMemoryMiB
			}
			model := cmp.Or(g.Model, "GPU of unknown model")
			i := slices.IndexFunc(out, func(m modelGroup) bool { return m.model == model })
			if i < 0 {
				out = append(out, modelGroup{model: model})
				i = len(out) - 1
			}
			out[i].count++
			out[i].memMiB = max(out[i].memMiB, mem)
		}
	}
	slices.SortStableFunc(out, func(a, b modelGroup) int { return cmp.Compare(b.memMiB, a.memMiB) })
	return out
}

// gpuCount is the number of GPUs in groups.
func gpuCount(groups []modelGroup) int {
	n := 0
	for _, g := range groups {
		n += g.count
	}
	return n
}

// describe lists groups: "1 H100-SXM of 79.6Gi", "2 A100-80GB of 80Gi, 2 L4 of 22.5Gi".
func describeGroups(groups []modelGroup) string {
	if len(groups) == 0 {
		return "none"
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%d %s of %s", g.count, g.model, approxMiB(g.memMiB))
	}
	return strings.Join(parts, ", ")
}

// approxMiB renders memory for reading: "80Gi", "79.6Gi", "512Mi".
func approxMiB(mib int64) string {
	if mib < 1024 {
		return fmt.Sprintf("%dMi", mib)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(mib)/1024), ".0") + "Gi"
}

// exactMiB renders memory a user can type back: "80Gi", or "81559Mi
// (about 79.6Gi)" when no short form is exact.
func exactMiB(mib int64) string {
	s := quantity.FormatMiB(mib)
	if a := approxMiB(mib); a != s {
		s += " (about " + a + ")"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// parseGPU parses a submission's GPU fields with the shared parser, then
// checks its models against this host's GPUs. Memory and count bounds
// need the engine's view of the idle host and are checked by
// fitsEverLocked.
func (d *Daemon) parseGPU(fields map[string]string) (request.GPU, error) {
	gpu, err := request.Parse(fields, nil)
	if err != nil {
		var fe *request.FieldError
		if !errors.As(err, &fe) {
			return request.GPU{}, &InputError{Field: "gpu", Msg: err.Error()}
		}
		if fe.Field == request.FieldCount {
			return request.GPU{}, d.countError(fe.Value, false)
		}
		if limitAlone(fields) {
			return request.GPU{}, d.limitAloneError(fields)
		}
		return request.GPU{}, &InputError{Field: fe.Field, Msg: fmt.Sprintf("must be %s, got %q", fe.AllowedAs(FlagOf), fe.Value)}
	}
	if len(gpu.Models) > 0 {
		if gpu.Models, err = d.hostModels(gpu.Models, fields[request.FieldModel]); err != nil {
			return request.GPU{}, err
		}
	}
	return gpu, nil
}

// limitAlone reports whether fields set a memory cap (not a percentage)
// and neither the guaranteed memory nor a compute share, which
// request.Parse refuses as a missing memory field.
func limitAlone(fields map[string]string) bool {
	_, compute := fields[request.FieldCompute]
	_, memory := fields[request.FieldMemory]
	limit, hasLimit := fields[request.FieldMemoryLimit]
	return hasLimit && !compute && !memory && !strings.HasSuffix(strings.TrimSpace(limit), "%")
}

// limitAloneError is the error for --gpu-memory-limit given alone: it
// names that flag (the one the user gave), its value and the memory of
// this host's largest GPU it may use, then says what must come with it.
func (d *Daemon) limitAloneError(fields map[string]string) error {
	given := fields[request.FieldMemoryLimit]
	trial := maps.Clone(fields)
	trial[request.FieldCompute] = "1" // to check the cap's value (and the model) alone
	gpu, err := d.parseGPU(trial)
	if err != nil {
		return err
	}
	need := "--gpu-memory (the memory each GPU guarantees, at most the cap) or --gpu-fraction (a share of each GPU) with it"
	allowed := d.hostGroups(allowedBy(gpu), false)
	if len(allowed) == 0 {
		return &InputError{Field: request.FieldMemoryLimit, Msg: fmt.Sprintf("needs %s, got %q alone", need, given)}
	}
	largest := allowed[0]
	of := ""
	if c := constraint(gpu, fields, false); c != "" {
		of = " allowed by " + c
	}
	if gpu.MemoryLimitMiB > largest.memMiB {
		return &InputError{Field: request.FieldMemoryLimit, Msg: fmt.Sprintf("must be at most %s, the memory of this host's largest GPU%s (%s), got %q; and it needs %s",
			exactMiB(largest.memMiB), of, largest.model, given, need)}
	}
	return &InputError{Field: request.FieldMemoryLimit, Msg: fmt.Sprintf("needs %s, got %q alone (at most %s, the memory of this host's largest GPU%s, %s)",
		need, given, exactMiB(largest.memMiB), of, largest.model)}
}

// countError is the --gpus error: what is given is not a whole number in
// [1, this host's GPUs]. number says it is one (too large).
func (d *Daemon) countError(value string, number bool) error {
	groups := d.hostGroups(nil, true)
	n := gpuCount(groups)
	what := "a whole number in"
	if number {
		what = "in"
	}
	return &InputError{Field: request.FieldCount, Msg: fmt.Sprintf("must be %s [1, %d] (this host has %s: %s), got %q",
		what, n, plural(n, "GPU", "GPUs"), describeGroups(groups), value)}
}

// hostModels resolves model names to the catalog's canonical names and
// requires that at least one GPU of this host is of one of them.
func (d *Daemon) hostModels(names []string, given string) ([]string, error) {
	var models []string
	for _, name := range names {
		ms := d.cfg.Catalog.Match(name)
		if len(ms) == 0 {
			return nil, d.modelError(name)
		}
		for _, m := range ms {
			if !slices.Contains(models, m.Name) {
				models = append(models, m.Name)
			}
		}
	}
	slices.Sort(models)
	if len(d.hostGroups(func(g *placement.GPU) bool { return slices.Contains(models, g.Model) }, false)) == 0 {
		return nil, d.modelError(given)
	}
	return models, nil
}

func (d *Daemon) modelError(value string) error {
	var names []string
	for _, g := range d.hostGroups(nil, false) {
		names = append(names, g.model)
	}
	slices.Sort(names)
	return &InputError{Field: request.FieldModel, Msg: fmt.Sprintf("must be a model this host has (%s), got %q", strings.Join(names, ", "), value)}
}

// allowedBy keeps the GPUs of a model the engine request allows.
func allowedBy(engine request.GPU) func(g *placement.GPU) bool {
	return func(g *placement.GPU) bool { return len(engine.Models) == 0 || slices.Contains(engine.Models, g.Model) }
}

// constraint names the flags that narrow which GPUs a request can use:
// "--model L4", "--mig 1g.18gb", "--gpu-memory 30Gi" (memory with
// withMemory).
func constraint(gpu request.GPU, fields map[string]string, withMemory bool) string {
	var parts []string
	if v := fields[request.FieldModel]; v != "" {
		parts = append(parts, "--model "+v)
	}
	if gpu.MIGProfile != "" {
		parts = append(parts, "--mig "+gpu.MIGProfile)
	}
	if v := fields[request.FieldMemory]; withMemory && v != "" {
		parts = append(parts, "--gpu-memory "+v)
	}
	return strings.Join(parts, " ")
}

// neverFits says in host words why the idle host can never take job: the
// engine's rejection of its request on the idle host, translated.
func (d *Daemon) neverFits(job api.Job, fields map[string]string, r placement.Rejection) error {
	gpu, engine := job.GPU, podOf(job).GPU
	f := r.GPUs
	count := fmt.Sprint(gpu.Count)
	allowed := d.hostGroups(allowedBy(engine), true)
	if gpu.MIGProfile != "" {
		offering := d.hostGroups(func(g *placement.GPU) bool { return allowedBy(engine)(g) && migOffers(g, gpu.MIGProfile) }, true)
		if gpuCount(offering) == 0 {
			return &InputError{Field: request.FieldMIGProfile, Msg: fmt.Sprintf("must be the profile of an instance this host's GPUs in MIG mode have (their layout is fixed: not marked migManaged, Tessera creates no instance on them), got %q", gpu.MIGProfile)}
		}
		if n := gpuCount(offering); n < gpu.Count {
			return &InputError{Field: request.FieldCount, Msg: fmt.Sprintf("must be at most %d with %s (this host's GPUs in MIG mode that can hold a %s instance: %s; one instance per GPU), got %q",
				n, constraint(gpu, fields, false), gpu.MIGProfile, describeGroups(offering), count)}
		}
	}
	switch {
	case r.Unit != placement.UnitGPUs:
	case f.Have < f.Want:
		return d.countError(count, true)
	case f.Allowed < f.Want && f.Allowed > 0:
		return &InputError{Field: request.FieldCount, Msg: fmt.Sprintf("must be at most %d with %s (this host has %s), got %q",
			f.Allowed, constraint(gpu, fields, false), describeGroups(allowed), count)}
	case f.Allowed < f.Want:
		return d.modelError(fields[request.FieldModel])
	case f.Usable() == 0 && f.ShortMemory > 0 && gpu.MemoryMiB > 0:
		largest := allowed[0]
		of := ""
		if c := constraint(gpu, fields, false); c != "" {
			of = " allowed by " + c
		}
		return &InputError{Field: request.FieldMemory, Msg: fmt.Sprintf("must be at most %s, the memory of this host's largest GPU%s (%s), got %q",
			exactMiB(largest.memMiB), of, largest.model, fields[request.FieldMemory])}
	case f.Usable() < f.Want && gpu.MemoryMiB > 0:
		roomy := d.hostGroups(func(g *placement.GPU) bool { return allowedBy(engine)(g) && g.FreeMemoryMiB >= gpu.MemoryMiB }, true)
		return &InputError{Field: request.FieldCount, Msg: fmt.Sprintf("must be at most %d with %s (this host's GPUs with that much memory: %s), got %q",
			f.Usable(), constraint(gpu, fields, true), describeGroups(roomy), count)}
	}
	return &InputError{Field: "gpu", Msg: fmt.Sprintf("this host cannot take %s even with nothing else running (this host has %s)%s", describeRequest(gpu), describeGroups(d.hostGroups(nil, true)), d.migNote(gpu))}
}

// migOffers reports whether g, idle, is in MIG mode and can hold an
// instance of profile: an existing one, or a new one where Tessera manages
// its layout.
func migOffers(g *placement.GPU, profile string) bool {
	if g.MIG == nil {
		return false
	}
	for _, in := range g.MIG.Instances {
		if strings.EqualFold(in.Profile, profile) {
			return true
		}
	}
	return g.MIG.Managed && g.MIG.Spec != nil && g.MIG.Spec.ProfileIndex(profile) >= 0
}

// migNote tells a job without --mig that the host's GPUs in MIG mode take
// --mig jobs only ("" when none is in MIG mode or the job is a MIG job).
func (d *Daemon) migNote(gpu request.GPU) string {
	if gpu.MIGProfile != "" {
		return ""
	}
	n := gpuCount(d.hostGroups(func(g *placement.GPU) bool { return g.MIG != nil }, false))
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %s in MIG mode, which take only --mig jobs", plural(n, "GPU is", "GPUs are"))
}

// checkMemoryLimit checks a memory cap against the GPUs the request may
// use: at most the largest one's memory. (A cap below the memory a
// --gpu-fraction share guarantees is left as it was: accepted.)
func (d *Daemon) checkMemoryLimit(job api.Job, fields map[string]string) error {
	gpu := job.GPU
	if gpu.MemoryLimitMiB == 0 || gpu.MIGProfile != "" {
		return nil
	}
	given := fields[request.FieldMemoryLimit]
	allowed := d.hostGroups(allowedBy(podOf(job).GPU), false)
	if len(allowed) == 0 {
		return nil
	}
	if largest := allowed[0]; gpu.MemoryLimitMiB > largest.memMiB {
		of := ""
		if c := constraint(gpu, fields, false); c != "" {
			of = " allowed by " + c
		}
		return &InputError{Field: request.FieldMemoryLimit, Msg: fmt.Sprintf("must be at most %s, the memory of this host's largest GPU%s (%s), got %q",
			exactMiB(largest.memMiB), of, largest.model, given)}
	}
	return nil
}

// describeRequest names a request the way its flags do.
func describeRequest(gpu request.GPU) string {
	if gpu.MIGProfile != "" {
		return fmt.Sprintf("%s of MIG profile %s", plural(gpu.Count, "instance", "instances"), gpu.MIGProfile)
	}
	s := plural(gpu.Count, "GPU", "GPUs")
	if gpu.ComputeMilli > 0 && gpu.ComputeMilli < request.Whole {
		s = fmt.Sprintf("%s of each of %s", quantity.FormatShare(gpu.ComputeMilli), s)
	}
	if gpu.MemoryMiB > 0 {
		s += " with " + quantity.FormatMiB(gpu.MemoryMiB) + " each"
	}
	return s
}

// waitReason says in host words why the head of the queue does not fit
// the host now (err is the engine's answer on the live bookings).
func waitReason(j api.Job, err error) string {
	var nf *placement.NoFitError
	if !errors.As(err, &nf) || nf.First.Unit != placement.UnitGPUs {
		return "no room on this host's GPUs now"
	}
	f := nf.First.GPUs
	gpu := j.GPU
	var need string
	switch {
	case gpu.MIGProfile != "":
		need = fmt.Sprintf("%s with room for a MIG %s instance", plural(f.Want, "GPU", "GPUs"), gpu.MIGProfile)
	case gpu.ComputeMilli >= request.Whole || gpu.Exclusive:
		need = plural(f.Want, "whole GPU", "whole GPUs")
	case gpu.ComputeMilli == 0:
		need = fmt.Sprintf("%s with %s of memory", plural(f.Want, "GPU", "GPUs"), quantity.FormatMiB(gpu.MemoryMiB))
	default:
		need = fmt.Sprintf("%s with %s of its compute", plural(f.Want, "GPU", "GPUs"), quantity.FormatShare(gpu.ComputeMilli))
		if gpu.MemoryMiB > 0 {
			need += " and " + quantity.FormatMiB(gpu.MemoryMiB) + " of memory"
		}
	}
	return fmt.Sprintf("needs %s free (free now: %d of %d)", need, f.Usable(), f.Allowed)
}
