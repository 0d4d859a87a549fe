package server

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// Limits of the proof exchange (api.ChallengePath).
const (
	// challengeTTL is how long a challenge's nonce may be used.
	challengeTTL = time.Minute
	// maxChallenges bounds the nonces kept at once; past it the oldest
	// goes first (a flood of challenges can only make a slow client ask
	// again).
	maxChallenges = 4096
	// nonceBytes is the size of every nonce, the client's and the daemon's.
	nonceBytes = 32
)

// nonces are the daemon's outstanding challenge nonces: each is taken
// once, before it expires.
type nonces struct {
	mu  sync.Mutex
	now func() time.Time
	// issued maps a nonce to when it was issued.
	issued map[string]time.Time
}

func newNonces(now func() time.Time) *nonces {
	return &nonces{now: now, issued: map[string]time.Time{}}
}

// issue makes a fresh nonce.
func (n *nonces) issue() (string, error) {
	var raw [nonceBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("challenge nonce: %w", err)
	}
	nonce := base64.RawURLEncoding.EncodeToString(raw[:])
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	if len(n.issued) >= maxChallenges {
		oldest, at := "", now
		for k, t := range n.issued {
			if now.Sub(t) > challengeTTL {
				delete(n.issued, k)
				continue
			}
			if !t.After(at) {
				oldest, at = k, t
			}
		}
		if len(n.issued) >= maxChallenges {
			delete(n.issued, oldest)
		}
	}
	n.issued[nonce] = now
	return nonce, nil
}

// take uses up nonce: true when it was issued and has not expired or been
// taken before.
func (n *nonces) take(nonce string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.issued[nonce]
	delete(n.issued, nonce)
	return ok && n.now().Sub(at) <= challengeTTL
}

// challenge answers api.ChallengePath over TCP: a fresh nonce, and the
// daemon's proof that it holds the token, over the client's nonce and the
// address the connection was accepted on (see package api).
func (s *Server) challenge(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Context().Value(connKey{}).(conn)
	switch {
	case c.unix:
		writeJSON(w, http.StatusNotFound, api.Error{Error: "the unix socket needs no token: its file mode says who may connect"})
		return
	case s.token == "":
		writeJSON(w, http.StatusNotFound, api.Error{Error: "this daemon has no API token (it was started without --http)"})
		return
	}
	client := r.URL.Query().Get("client")
	if raw, err := base64.RawURLEncoding.DecodeString(client); err != nil || len(raw) != nonceBytes {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: fmt.Sprintf("client: must be %d random bytes in unpadded base64url, got %q", nonceBytes, client), Field: "client"})
		return
	}
	nonce, err := s.nonces.issue()
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, api.Challenge{Nonce: nonce, Proof: api.DaemonProof(s.token, client, nonce, c.local.String())})
}

// validProof checks a Tessera-Proof Authorization header of a request that
// came over TCP on local. It reads the body to check its digest and puts
// it back (at most limit bytes: a longer body fails the check).
func (s *Server) validProof(r *http.Request, auth string, local string, limit int64) (bool, string) {
	nonce, proof, ok := api.ParseProofHeader(auth)
	if !ok {
		return false, "the Authorization header is not a valid " + api.ProofScheme + " (nonce=N,proof=P)"
	}
	if s.token == "" {
		return false, "this daemon has no API token"
	}
	if !s.nonces.take(nonce) {
		return false, fmt.Sprintf("the proof's nonce is unknown, used before or older than %s: ask %s for a new one", challengeTTL, api.ChallengePath)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return false, fmt.Sprintf("read the request body: %v", err)
	}
	if int64(len(body)) > limit {
		return false, fmt.Sprintf("the request body is larger than %d bytes", limit)
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	want := api.RequestProof(s.token, nonce, r.Method, r.URL.RequestURI(), sha256.Sum256(body), local)
	if !api.ProofEqual(proof, want) {
		return false, "the proof does not match this daemon's token, this call and this address"
	}
	return true, ""
}
