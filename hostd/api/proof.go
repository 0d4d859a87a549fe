package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// The proof exchange: over TCP (tessera up --http) the tessera CLI never
// sends the API token itself. Before a call it asks the daemon to prove
// that it holds the token, then proves it holds the token too, for that
// one call:
//
//  1. GET ChallengePath?client=CN, with CN fresh random bytes (base64url).
//     The daemon answers a Challenge: a fresh single-use Nonce and
//     Proof = DaemonProof(token, CN, Nonce, ADDR), where ADDR is the
//     address the daemon accepted the connection on ("127.0.0.1:9400").
//     The client checks it against the address it connected to: a program
//     that does not hold the token (another user's, on a port the daemon
//     left or on a name such as localhost that reaches another address)
//     cannot answer, and one that relays the challenge to the real daemon
//     gets a proof for the daemon's address, not its own. The client then
//     sends nothing more to it.
//  2. The call itself carries "Authorization: Tessera-Proof nonce=N,
//     proof=P" with P = RequestProof(token, N, method, request URI, the
//     body's SHA-256, ADDR). The daemon accepts each nonce once, within
//     ChallengeTTL: a captured header opens nothing else, and relayed to
//     another address it does not verify.
//
// "Authorization: Bearer TOKEN" is still accepted, for scripts (curl) that
// are pointed at the daemon's address by hand.

// ChallengePath is where a TCP client asks the daemon for a challenge.
const ChallengePath = "/v1/auth/challenge"

// ProofScheme is the Authorization scheme of a proven call.
const ProofScheme = "Tessera-Proof"

// Challenge is the daemon's answer on ChallengePath.
type Challenge struct {
	// Nonce is single use: the next call proves the token over it.
	Nonce string `json:"nonce"`
	// Proof is DaemonProof over the client's nonce, Nonce and the address
	// the daemon accepted the connection on.
	Proof string `json:"proof"`
}

// DaemonProof is the daemon's answer to a client's challenge.
func DaemonProof(token, clientNonce, nonce, addr string) string {
	return mac(token, "tessera daemon proof v1", clientNonce, nonce, addr)
}

// RequestProof proves a call: its method, request URI (path and query as
// sent), body digest (SHA-256 of the body, of nothing when there is none)
// and the daemon's address, over a nonce the daemon gave.
func RequestProof(token, nonce, method, requestURI string, bodySum [sha256.Size]byte, addr string) string {
	return mac(token, "tessera request proof v1", nonce, method, requestURI, hex.EncodeToString(bodySum[:]), addr)
}

// ProofHeader is the Authorization header value of a proven call.
func ProofHeader(nonce, proof string) string {
	return ProofScheme + " nonce=" + nonce + ",proof=" + proof
}

// ParseProofHeader splits a ProofHeader value; ok is false when it is not one.
func ParseProofHeader(v string) (nonce, proof string, ok bool) {
	scheme, rest, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, ProofScheme) {
		return "", "", false
	}
	for part := range strings.SplitSeq(rest, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "nonce":
			nonce = val
		case "proof":
			proof = val
		}
	}
	return nonce, proof, nonce != "" && proof != ""
}

// ProofEqual compares two proofs in constant time.
func ProofEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

func mac(token string, parts ...string) string {
	h := hmac.New(sha256.New, []byte(token))
	for _, p := range parts {
		// Parts end with a newline, which none holds (nonces are
		// base64url, methods and addresses have none, a request URI is
		// escaped), so no two lists of parts read the same.
		h.Write([]byte(p))
		h.Write([]byte{'\n'})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
