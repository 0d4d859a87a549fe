package handoff

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// Key names one container's allocation: its TESSERA_CONTAINER_ID, the
// folder of its enforcement state and its checkpoint entry. It is a hash of
// the device IDs kubelet gave the container and the container's identity, so
// the agent can recompute it from kubelet's PodResources report after losing
// its checkpoint, and a slot reused by a later pod gets a fresh key. It
// matches the interception library's container ID rule
// ([A-Za-z0-9][A-Za-z0-9_.-]{0,127}).
func Key(deviceIDs []string, podUID, container string) string {
	ids := append([]string(nil), deviceIDs...)
	sort.Strings(ids)
	h := sha256.New()
	h.Write([]byte(strings.Join(ids, "\n")))
	h.Write([]byte{0})
	h.Write([]byte(podUID))
	h.Write([]byte{0})
	h.Write([]byte(container))
	return "tsr-" + hex.EncodeToString(h.Sum(nil))[:20]
}

// SameDevices reports whether a and b hold the same device IDs.
func SameDevices(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}
