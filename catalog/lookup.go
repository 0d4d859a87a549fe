package catalog

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// Catalog is an immutable, indexed set of models. It is safe for concurrent use.
type Catalog struct {
	models []Model          // sorted: vendor, then name
	byKey  map[string]int   // normalized name or alias -> index
	family map[string][]int // normalized family -> indexes
}

// Default returns the catalog compiled into Tessera.
func Default() *Catalog {
	c, err := New(builtinModels())
	if err != nil {
		// The built-in table is checked by tests; reaching this is a build defect.
		panic(fmt.Sprintf("catalog: built-in table is invalid: %v", err))
	}
	return c
}

// New indexes models. Names and aliases must be unique across the set once
// normalized (case, spaces and punctuation ignored).
func New(models []Model) (*Catalog, error) {
	c := &Catalog{
		models: append([]Model(nil), models...),
		byKey:  map[string]int{},
		family: map[string][]int{},
	}
	sort.SliceStable(c.models, func(i, j int) bool {
		if c.models[i].Vendor != c.models[j].Vendor {
			return c.models[i].Vendor < c.models[j].Vendor
		}
		return c.models[i].Name < c.models[j].Name
	})
	for i := range c.models {
		m := &c.models[i]
		if m.Name == "" {
			return nil, fmt.Errorf("model %d: name is empty", i)
		}
		if m.Family == "" {
			m.Family = m.Name
		}
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			k := normalize(n)
			if k == "" {
				return nil, fmt.Errorf("model %s: alias %q normalizes to nothing", m.Name, n)
			}
			if j, dup := c.byKey[k]; dup && j != i {
				return nil, fmt.Errorf("model %s: name or alias %q already names %s", m.Name, n, c.models[j].Name)
			}
			c.byKey[k] = i
		}
		fk := normalize(m.Family)
		c.family[fk] = append(c.family[fk], i)
	}
	return c, nil
}

// Models returns every model, sorted by vendor then name.
func (c *Catalog) Models() []Model { return append([]Model(nil), c.models...) }

// Common returns the models shown by default.
func (c *Catalog) Common() []Model {
	var out []Model
	for _, m := range c.models {
		if m.Common {
			out = append(out, m)
		}
	}
	return out
}

// Lookup finds the one model a name or alias denotes. A vendor prefix
// ("NVIDIA H200") and differences in case, spaces and punctuation are ignored.
func (c *Catalog) Lookup(name string) (Model, bool) {
	for _, k := range keys(name) {
		if i, ok := c.byKey[k]; ok {
			return c.models[i], true
		}
	}
	return Model{}, false
}

// Resolve is Lookup with an error that lists close matches.
func (c *Catalog) Resolve(name string) (Model, error) {
	if m, ok := c.Lookup(name); ok {
		return m, nil
	}
	return Model{}, c.unknown(name)
}

// Match returns every model a filter or model constraint denotes: all members
// of a family when it names one ("H100"), else the model named by a name or
// alias. The result is empty when nothing matches.
func (c *Catalog) Match(filter string) []Model {
	for _, k := range keys(filter) {
		if idx, ok := c.family[k]; ok {
			out := make([]Model, 0, len(idx))
			for _, i := range idx {
				out = append(out, c.models[i])
			}
			return out
		}
	}
	if m, ok := c.Lookup(filter); ok {
		return []Model{m}
	}
	return nil
}

// MatchOrError is Match with an error listing close matches when nothing matches.
func (c *Catalog) MatchOrError(filter string) ([]Model, error) {
	if ms := c.Match(filter); len(ms) > 0 {
		return ms, nil
	}
	return nil, c.unknown(filter)
}

func (c *Catalog) unknown(name string) error {
	if s := c.Suggest(name, 3); len(s) > 0 {
		return fmt.Errorf("unknown GPU model %q; did you mean %s?", name, strings.Join(s, ", "))
	}
	return fmt.Errorf("unknown GPU model %q; run `tessera show-gpus -a` for the list", name)
}

// Suggest returns up to n canonical model names close to name: names that
// contain it or that it contains first, then the nearest by edit distance.
// Ties are broken by the plain edit distance, so "H2000" suggests H200 before
// H20 although both are contained in it.
func (c *Catalog) Suggest(name string, n int) []string {
	q := normalize(name)
	if q == "" || n <= 0 {
		return nil
	}
	type cand struct {
		name string
		dist int // edit distance, capped at 1 for containment
		edit int // plain edit distance
	}
	less := func(a, b cand) bool {
		if a.dist != b.dist {
			return a.dist < b.dist
		}
		if a.edit != b.edit {
			return a.edit < b.edit
		}
		return a.name < b.name
	}
	best := map[string]cand{}
	for k, i := range c.byKey {
		e := levenshtein(q, k)
		d := e
		if strings.Contains(k, q) || strings.Contains(q, k) {
			d = min(d, 1)
		}
		cd := cand{c.models[i].Name, d, e}
		if old, ok := best[cd.name]; !ok || less(cd, old) {
			best[cd.name] = cd
		}
	}
	limit := max(2, len(q)/3)
	var cs []cand
	for _, cd := range best {
		if cd.dist <= limit {
			cs = append(cs, cd)
		}
	}
	sort.Slice(cs, func(i, j int) bool { return less(cs[i], cs[j]) })
	out := make([]string, 0, n)
	for _, cd := range cs {
		if len(out) == n {
			break
		}
		out = append(out, cd.name)
	}
	return out
}

// keys returns the normalized lookup keys for a name: the name itself and the
// name without a leading vendor.
func keys(name string) []string {
	k := normalize(name)
	out := []string{k}
	for _, v := range []Vendor{NVIDIA, AMD, Intel} {
		if p := normalize(string(v)); strings.HasPrefix(k, p) && len(k) > len(p) {
			out = append(out, k[len(p):])
		}
	}
	return out
}

// normalize lowercases and drops everything but letters and digits.
func normalize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

func equalFold(a, b string) bool { return normalize(a) == normalize(b) }

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
