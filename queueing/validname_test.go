package queueing

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	long := strings.Repeat("a", 63)
	for name, want := range map[string]bool{
		"default": true, "a": true, "9": true, "team-a.prod": true, long: true,
		"": false, long + "a": false, "-a": false, "a-": false, ".a": false, "a.": false,
		"Team": false, "a_b": false, "a b": false, "é": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}
