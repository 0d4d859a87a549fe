package rate

// Refill is what to do to a client's token balance for one period.
type Refill struct {
	// Add is the tokens to add (atomic add); 0 when nothing is added.
	Add int64
	// Ceiling, when Lower is set, is the balance to revoke down to with a
	// compare-and-swap (tokens above it are taken back).
	Ceiling int64
	Lower   bool
}

// Bucket decides a refill as a token bucket: grant tokens, but never let
// the balance exceed ceiling, and revoke down to the ceiling when it is
// already above it (the client's share shrank, or it went idle).
func Bucket(balance, grant, ceiling int64) Refill {
	if balance > ceiling {
		return Refill{Ceiling: ceiling, Lower: true}
	}
	return Refill{Add: max(0, min(grant, ceiling-balance))}
}
