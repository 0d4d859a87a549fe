package placement

import (
	"strings"
	"testing"
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
