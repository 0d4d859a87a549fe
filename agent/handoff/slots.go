package handoff

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// slotSep separates a unit's UUID from the slot number in a device ID.
const slotSep = "::s"

// MaxSlotsPerUnit bounds the slots each GPU (or MIG instance) offers kubelet:
// one slot per container sharing the GPU, and the smallest share is 1/1000.
const MaxSlotsPerUnit = 1000

// SlotID is the device ID of slot k of the GPU (or MIG instance) uuid:
// "GPU-1234::s7". The ID says which GPU it is on, so kubelet's choice of
// devices, its checkpoint and its PodResources API all name GPUs.
func SlotID(uuid string, k int) string {
	return uuid + slotSep + strconv.Itoa(k)
}

// ParseSlot splits a device ID made by SlotID.
func ParseSlot(id string) (uuid string, k int, err error) {
	i := strings.LastIndex(id, slotSep)
	if i <= 0 {
		return "", 0, fmt.Errorf("device ID %q: want UUID%sN as the agent advertises", id, slotSep)
	}
	k, err = strconv.Atoi(id[i+len(slotSep):])
	if err != nil || k < 0 || k >= MaxSlotsPerUnit {
		return "", 0, fmt.Errorf("device ID %q: slot number must be in [0, %d)", id, MaxSlotsPerUnit)
	}
	return id[:i], k, nil
}

// UnitsOf returns the distinct GPU UUIDs a set of device IDs sits on, sorted.
func UnitsOf(deviceIDs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, id := range deviceIDs {
		uuid, _, err := ParseSlot(id)
		if err != nil {
			return nil, err
		}
		if !seen[uuid] {
			seen[uuid] = true
			out = append(out, uuid)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Slots lists the device IDs of every unit, slotsPerUnit each, in unit order.
func Slots(units []string, slotsPerUnit int) ([]string, error) {
	if slotsPerUnit < 1 || slotsPerUnit > MaxSlotsPerUnit {
		return nil, fmt.Errorf("slots per GPU: must be in [1, %d], got %d", MaxSlotsPerUnit, slotsPerUnit)
	}
	out := make([]string, 0, len(units)*slotsPerUnit)
	for _, u := range units {
		for k := range slotsPerUnit {
			out = append(out, SlotID(u, k))
		}
	}
	return out, nil
}

// Prefer picks size device IDs from available that sit on the given units,
// one per unit in the order given, lowest slot first, after the IDs in
// mustInclude. It returns nil when that is impossible (a unit with no free
// slot, or a size that does not match), and the caller then lets kubelet
// choose.
func Prefer(available, mustInclude []string, units []string, size int) []string {
	if size != len(units) || len(mustInclude) > size {
		return nil
	}
	free := map[string][]string{}
	for _, id := range available {
		u, _, err := ParseSlot(id)
		if err != nil {
			continue
		}
		free[u] = append(free[u], id)
	}
	taken := map[string]bool{}
	out := append([]string(nil), mustInclude...)
	for _, id := range mustInclude {
		u, _, err := ParseSlot(id)
		if err != nil {
			return nil
		}
		taken[u] = true
	}
	for _, u := range units {
		if taken[u] {
			continue
		}
		ids := free[u]
		if len(ids) == 0 {
			return nil
		}
		sort.Slice(ids, func(i, j int) bool { return slotNum(ids[i]) < slotNum(ids[j]) })
		out = append(out, ids[0])
		taken[u] = true
	}
	if len(out) != size {
		return nil
	}
	return out
}

func slotNum(id string) int {
	_, k, _ := ParseSlot(id)
	return k
}
