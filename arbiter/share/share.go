package share

import (
	"fmt"
	"sort"

	"github.com/tessera-gpu/tessera/request"
)

// Client is one client's standing and demand on one GPU, in thousandths.
type Client struct {
	// Guarantee is the share the client gets whenever it wants it, [1, 1000].
	Guarantee int64
	// Limit is the share it never exceeds, [Guarantee, 1000].
	Limit int64
	// Demand is the share it would use next period, [0, 1000]: 0 is idle,
	// request.Whole (or anything at or above Limit) is busy without bound.
	Demand int64
	// Lends marks a client whose guarantee is lent (an idle holder): its
	// Guarantee is then only the floor it keeps, and it gets more than
	// min(Guarantee, Demand) only out of what is left once every other
	// client is at min(Limit, Demand).
	Lends bool
}

// Busy reports whether the client wants at least its guarantee.
func (c Client) Busy() bool { return c.Demand >= c.Guarantee }

// Validate checks the clients of one GPU; errors name the client index, the
// field and the allowed range.
func Validate(clients []Client) error {
	var sum int64
	for i, c := range clients {
		switch {
		case c.Guarantee < 1 || c.Guarantee > request.Whole:
			return fmt.Errorf("clients[%d].guarantee: must be in [1, %d], got %d", i, request.Whole, c.Guarantee)
		case c.Limit < c.Guarantee || c.Limit > request.Whole:
			return fmt.Errorf("clients[%d].limit: must be in [%d, %d], got %d", i, c.Guarantee, request.Whole, c.Limit)
		case c.Demand < 0 || c.Demand > request.Whole:
			return fmt.Errorf("clients[%d].demand: must be in [0, %d], got %d", i, request.Whole, c.Demand)
		}
		sum += c.Guarantee
	}
	if sum > request.Whole {
		return fmt.Errorf("clients: guarantees must sum to at most %d, got %d", request.Whole, sum)
	}
	return nil
}

// Allocate returns each client's time share for the next period, in the
// order given. Shares are whole thousandths; their sum never exceeds request.Whole.
func Allocate(clients []Client) ([]int64, error) {
	if err := Validate(clients); err != nil {
		return nil, err
	}
	out := make([]int64, len(clients))
	ceil := make([]int64, len(clients))
	left := int64(request.Whole)
	for i, c := range clients {
		ceil[i] = min(c.Limit, c.Demand)
		out[i] = min(c.Guarantee, c.Demand)
		left -= out[i]
	}
	// Borrowers first: lenders share only what the others leave.
	for _, lends := range []bool{false, true} {
		open := make([]int, 0, len(clients))
		for i, c := range clients {
			if c.Lends == lends && out[i] < ceil[i] {
				open = append(open, i)
			}
		}
		left = fill(clients, out, ceil, open, left)
	}
	return out, nil
}

// fill water-fills left thousandths over the open clients by guarantee and
// returns what it could not hand out (some only when every open client
// reached its ceiling). Each round either freezes the clients whose
// ceiling the proportional increment would reach (and repeats with the
// rest), or hands out the floors and then the remainder, one thousandth
// each, by largest fraction.
func fill(clients []Client, out, ceil []int64, open []int, left int64) int64 {
	for left > 0 && len(open) > 0 {
		var weight int64
		for _, i := range open {
			weight += clients[i].Guarantee
		}
		still := open[:0:0]
		froze := false
		for _, i := range open {
			if out[i]+left*clients[i].Guarantee/weight >= ceil[i] {
				left -= ceil[i] - out[i]
				out[i] = ceil[i]
				froze = true
			} else {
				still = append(still, i)
			}
		}
		if froze {
			open = still
			continue
		}
		type frac struct {
			i   int
			rem int64
		}
		fracs := make([]frac, 0, len(open))
		given := int64(0)
		for _, i := range open {
			inc := left * clients[i].Guarantee / weight
			out[i] += inc
			given += inc
			fracs = append(fracs, frac{i, left * clients[i].Guarantee % weight})
		}
		left -= given
		sort.SliceStable(fracs, func(a, b int) bool { return fracs[a].rem > fracs[b].rem })
		for k := 0; left > 0 && k < len(fracs); k++ {
			out[fracs[k].i]++ // floor+1 <= ceil: the floor stayed strictly below it
			left--
		}
		return left
	}
	return left
}
