package cli

import "testing"

// tessera up lends idle holders' guarantees unless told not to
// (issue 37 item 3; docs/host.md "Idle holders").
func TestUpLendsIdleGuaranteesByDefault(t *testing.T) {
	f := newUpCommand(&app{}).Flags().Lookup("lend-idle")
	if f == nil || f.DefValue != "true" || f.Value.Type() != "bool" {
		t.Fatalf("--lend-idle: %+v, want a bool flag defaulting to true", f)
	}
}
