package placement

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/request"
)

func TestCanonicalResolvesAliases(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"default", DefaultPolicy},
		{" Default ", DefaultPolicy},
		{"DEFAULT", DefaultPolicy},
		{"tessera", "tessera"},
		{"Tessera-Online", "tessera-online"},
		{"dotprod", "dotproduct"},
		{"clustering", "gpuclustering"},
		{"packing", "gpupacking"},
		{"binpack", "gpupacking"},
		{"fgd", "fgd"},
	} {
		got, err := Canonical(tc.name)
		if err != nil || got != tc.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
		// New takes the same names and its policy carries the canonical one,
		// so outputs keyed by Policy.Name never see an alias.
		pol, err := New(tc.name, Options{Seed: 1})
		if err != nil {
			t.Fatalf("New(%q): %v", tc.name, err)
		}
		if pol.Name() != tc.want {
			t.Errorf("New(%q).Name() = %q, want %q", tc.name, pol.Name(), tc.want)
		}
	}
}

func TestCanonicalRejectsUnknownNamingTheChoices(t *testing.T) {
	for _, name := range []string{"", "magic", "defaults", "tessera online"} {
		if got, err := Canonical(name); err == nil {
			t.Errorf("Canonical(%q) = %q, want an error", name, got)
			continue
		} else if msg := err.Error(); !strings.Contains(msg, `unknown policy "`+name+`"`) || !strings.Contains(msg, "tessera-online") || !strings.Contains(msg, "default") {
			t.Errorf("Canonical(%q): error %q should name the value, the policies and the default alias", name, msg)
		}
		if _, err := New(name, Options{}); err == nil {
			t.Errorf("New(%q) succeeded", name)
		}
	}
}

func TestCanonicalNamesAreFixedPoints(t *testing.T) {
	for _, name := range Names() {
		if got, err := Canonical(name); err != nil || got != name {
			t.Errorf("Canonical(%q) = %q, %v; want itself", name, got, err)
		}
	}
}

// TestTypicalOf: the distribution a policy places against, learned or
// given, as a copy; none for a policy that keeps none.
func TestTypicalOf(t *testing.T) {
	d := Distribution{{Shape: Shape{CPUMilli: 1000, GPUMilli: 500, GPUCount: 1}, Weight: 1}}
	for _, name := range []string{"tessera", "fgd"} {
		p, err := New(name, Options{Seed: 1, Typical: d})
		if err != nil {
			t.Fatal(err)
		}
		got := TypicalOf(p)
		if len(got) != 1 || got[0].Shape != d[0].Shape {
			t.Errorf("%s: TypicalOf = %v, want the given distribution", name, got)
		}
		got[0].Weight = 9
		if TypicalOf(p)[0].Weight != 1 {
			t.Errorf("%s: TypicalOf hands out the policy's own slice", name)
		}
	}
	on, _ := New("tessera-online", Options{Seed: 1})
	if got := TypicalOf(on); got != nil {
		t.Errorf("online before any arrival: %v, want none", got)
	}
	on.(Observer).Observe(&Pod{CPUMilli: 1000, GPU: request.GPU{Count: 1, ComputeMilli: 250, ComputeLimitMilli: 250}})
	if got := TypicalOf(on); len(got) != 1 || got[0].Shape.GPUMilli != 250 {
		t.Errorf("online after one arrival: %v, want its shape", got)
	}
	bf, _ := New("bestfit", Options{Seed: 1})
	if got := TypicalOf(bf); got != nil {
		t.Errorf("bestfit: %v, want none", got)
	}
}
