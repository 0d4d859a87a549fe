package share

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/request"
)

func TestAllocate(t *testing.T) {
	busy := int64(request.Whole)
	cases := []struct {
		name    string
		clients []Client
		want    []int64
	}{
		{"single busy client takes its limit", []Client{{300, 700, busy, false}}, []int64{700}},
		{"single idle client gets nothing", []Client{{300, 700, 0, false}}, []int64{0}},
		{"two busy split by guarantee", []Client{{300, 1000, busy, false}, {100, 1000, busy, false}}, []int64{750, 250}},
		{"idle share goes to the busy one", []Client{{300, 1000, 0, false}, {100, 1000, busy, false}}, []int64{0, 1000}},
		{"limit caps the burst, rest to the other", []Client{{300, 400, busy, false}, {100, 1000, busy, false}}, []int64{400, 600}},
		{"everyone capped leaves the GPU partly idle", []Client{{300, 400, busy, false}, {100, 200, busy, false}}, []int64{400, 200}},
		{"small demand is met exactly", []Client{{300, 1000, 50, false}, {100, 1000, busy, false}}, []int64{50, 950}},
		{"demand between guarantee and limit", []Client{{200, 1000, 350, false}, {200, 1000, busy, false}}, []int64{350, 650}},
		{"remainders go by largest fraction", []Client{{1, 1000, busy, false}, {1, 1000, busy, false}, {1, 1000, busy, false}}, []int64{334, 333, 333}},
		{"guarantees exactly fill the GPU", []Client{{500, 1000, busy, false}, {500, 1000, busy, false}}, []int64{500, 500}},
		{"no clients", nil, []int64{}},
		{"a lender keeps its floor, a borrower takes the rest up to its limit",
			[]Client{{100, 500, busy, true}, {250, 800, busy, false}}, []int64{200, 800}},
		{"a lender's guarantee goes to the borrower before the lender", // 250 + 500 - 100
			[]Client{{100, 500, busy, true}, {250, 800, busy, false}, {250, 250, busy, false}}, []int64{100, 650, 250}},
		{"without the lending mark the guarantee is served first",
			[]Client{{500, 500, busy, false}, {250, 800, busy, false}, {250, 250, busy, false}}, []int64{500, 250, 250}},
		{"an idle lender lends all", []Client{{100, 500, 0, true}, {250, 800, busy, false}}, []int64{0, 800}},
		{"lenders split the leftover by floor", []Client{{100, 1000, busy, true}, {50, 1000, busy, true}, {200, 400, busy, false}},
			[]int64{400, 200, 400}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Allocate(c.clients)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("Allocate(%v) = %v, want %v", c.clients, got, c.want)
			}
		})
	}
}

func TestAllocateRejectsBadInput(t *testing.T) {
	cases := []struct {
		name    string
		clients []Client
		want    string
	}{
		{"zero guarantee", []Client{{0, 10, 0, false}}, "clients[0].guarantee: must be in [1, 1000], got 0"},
		{"limit below guarantee", []Client{{100, 50, 0, false}}, "clients[0].limit: must be in [100, 1000], got 50"},
		{"limit above whole", []Client{{100, 1001, 0, false}}, "clients[0].limit"},
		{"negative demand", []Client{{100, 200, -1, false}}, "clients[0].demand: must be in [0, 1000], got -1"},
		{"oversold guarantees", []Client{{600, 1000, 0, false}, {500, 1000, 0, false}}, "guarantees must sum to at most 1000, got 1100"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Allocate(c.clients)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// randomClients draws a GPU's worth of clients whose guarantees sum to at
// most request.Whole, with mixed idle, partial and busy demand.
func randomClients(r *rand.Rand) []Client {
	n := 1 + r.IntN(8)
	left := int64(request.Whole)
	var out []Client
	for i := 0; i < n && left > 0; i++ {
		g := 1 + r.Int64N(min(left, 600))
		left -= g
		l := g + r.Int64N(request.Whole-g+1)
		var d int64
		switch r.IntN(3) {
		case 0: // idle
		case 1:
			d = r.Int64N(request.Whole + 1)
		default:
			d = request.Whole
		}
		out = append(out, Client{Guarantee: g, Limit: l, Demand: d})
	}
	return out
}

func TestAllocateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 20000; trial++ {
		clients := randomClients(r)
		got, err := Allocate(clients)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		var sum int64
		unsatisfied := false
		for i, c := range clients {
			s := got[i]
			sum += s
			if s < 0 || s > c.Limit {
				t.Fatalf("trial %d: client %d %+v got %d, outside [0, limit]", trial, i, c, s)
			}
			if s > c.Demand {
				t.Fatalf("trial %d: client %d %+v got %d, above its demand", trial, i, c, s)
			}
			if c.Busy() && s < c.Guarantee {
				t.Fatalf("trial %d: busy client %d %+v got %d, below its guarantee", trial, i, c, s)
			}
			if s < min(c.Guarantee, c.Demand) {
				t.Fatalf("trial %d: client %d %+v got %d, below min(guarantee, demand)", trial, i, c, s)
			}
			if s < min(c.Limit, c.Demand) {
				unsatisfied = true
			}
		}
		if sum > request.Whole {
			t.Fatalf("trial %d: shares %v sum to %d > %d", trial, got, sum, request.Whole)
		}
		if unsatisfied && sum != request.Whole {
			t.Fatalf("trial %d: %v -> %v: a client wants more but only %d is handed out", trial, clients, got, sum)
		}
	}
}

// TestAllocateLendersLast checks lenders on random GPUs: each gets at
// least min(floor, demand), and more only when every other client is at
// min(limit, demand); the split stays work-conserving.
func TestAllocateLendersLast(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 17))
	lenders := 0
	for trial := 0; trial < 20000; trial++ {
		clients := randomClients(r)
		for i := range clients {
			clients[i].Lends = r.IntN(3) == 0
		}
		got, err := Allocate(clients)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		var sum int64
		othersFull, unsatisfied, lenderAbove := true, false, false
		for i, c := range clients {
			sum += got[i]
			if got[i] < min(c.Guarantee, c.Demand) || got[i] > min(c.Limit, c.Demand) {
				t.Fatalf("trial %d: client %d %+v got %d, outside [min(guarantee, demand), min(limit, demand)]", trial, i, c, got[i])
			}
			if got[i] < min(c.Limit, c.Demand) {
				unsatisfied = true
				if !c.Lends {
					othersFull = false
				}
			}
			if c.Lends && got[i] > min(c.Guarantee, c.Demand) {
				lenderAbove = true
				lenders++
			}
		}
		if lenderAbove && !othersFull {
			t.Fatalf("trial %d: %v -> %v: a lender got above its floor while a borrower wants more", trial, clients, got)
		}
		if unsatisfied && sum != request.Whole {
			t.Fatalf("trial %d: %v -> %v: a client wants more but only %d is handed out", trial, clients, got, sum)
		}
	}
	if lenders == 0 {
		t.Fatal("no trial had a lender above its floor: the draw does not exercise the second round")
	}
}

// TestAllocateWeightsBurstByGuarantee checks fairness: two unlimited busy
// clients split any leftover in the ratio of their guarantees (within one
// thousandth of rounding).
func TestAllocateWeightsBurstByGuarantee(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for trial := 0; trial < 2000; trial++ {
		g1 := 1 + r.Int64N(499)
		g2 := 1 + r.Int64N(499)
		got, err := Allocate([]Client{{g1, request.Whole, request.Whole, false}, {g2, request.Whole, request.Whole, false}})
		if err != nil {
			t.Fatal(err)
		}
		// got[0]/got[1] ~ g1/g2  <=>  |got[0]*g2 - got[1]*g1| <= max(g1, g2)
		if d := got[0]*g2 - got[1]*g1; d > max(g1, g2) || -d > max(g1, g2) {
			t.Fatalf("guarantees %d/%d split as %v", g1, g2, got)
		}
	}
}
