package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/hostd/api"
	"github.com/tessera-gpu/tessera/hostd/peer"
)

// conn is what the guard knows about the connection a request came on.
type conn struct {
	// unix is true for the unix socket, false for TCP (--http).
	unix bool
	// peer is the unix socket peer's uid (SO_PEERCRED); peerKnown is
	// false when it could not be read.
	peer      uint32
	peerKnown bool
	// local is the TCP address the daemon accepted the connection on.
	local *net.TCPAddr
}

type connKey struct{}

// ConnContext records on a connection's context what the API's guard needs
// to know about it: on the unix socket the peer's uid, on TCP the local
// address the request must name in its Host header. Set it as the
// http.Server's ConnContext; a request on a connection without it is
// refused.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	switch c := c.(type) {
	case *net.UnixConn:
		uid, err := peer.UID(c)
		return context.WithValue(ctx, connKey{}, conn{unix: true, peer: uid, peerKnown: err == nil})
	case *net.TCPConn:
		if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
			return context.WithValue(ctx, connKey{}, conn{local: a})
		}
	}
	return ctx
}

// caller is who a request acts for: a uid, or nobody (a TCP caller
// without the token, or a socket peer whose uid could not be read).
type caller struct {
	uid   uint32
	known bool
}

type callerKey struct{}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// guard refuses what a web page or another local user must not do, then
// passes the request on with its caller:
//
//   - over TCP, the Host header must name the address the daemon listens
//     on (its IP and port, or localhost and the port): a name that
//     resolves to 127.0.0.1 by DNS rebinding is refused;
//   - an Origin header, on either listener, must be the daemon's own
//     loopback origin: cross-site requests are refused;
//   - a POST with a body must be application/json (an HTML form or a
//     "simple" cross-site fetch cannot send that without a preflight);
//   - over TCP, any call but GET and HEAD needs the API token (any local
//     user can reach a loopback port), as a proof over a challenge's nonce
//     (proof.go; the tessera CLI) or as a bearer token (curl); the token
//     makes the caller the daemon's user, no token makes it nobody;
//   - on the unix socket (whose file mode is its access control) the
//     caller is the peer's uid.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := r.Context().Value(connKey{}).(conn)
		if !ok {
			writeJSON(w, http.StatusForbidden, api.Error{Error: "the daemon cannot tell which listener this request came on"})
			return
		}
		if !c.unix {
			if allowed := hostsOf(c.local); !slices.Contains(allowed, strings.ToLower(r.Host)) {
				writeJSON(w, http.StatusForbidden, api.Error{Error: fmt.Sprintf(
					"Host %q is not this daemon's address (%s): requests naming another host are refused, as a DNS-rebinding web page would send; use http://%s",
					r.Host, strings.Join(allowed, " or "), allowed[0])})
				return
			}
		}
		if o := r.Header.Get("Origin"); o != "" && !s.ownOrigin(o, r.Host, c) {
			writeJSON(w, http.StatusForbidden, api.Error{Error: fmt.Sprintf(
				"Origin %q is not this daemon's own: requests from web pages of other sites are refused (the API runs commands); call it from the tessera CLI or a program that sends no Origin", o)})
			return
		}
		if r.Method == http.MethodPost {
			if err := jsonBody(r); err != nil {
				writeJSON(w, http.StatusUnsupportedMediaType, api.Error{Error: err.Error()})
				return
			}
		}
		var who caller
		if c.unix {
			who = caller{uid: c.peer, known: c.peerKnown}
		} else {
			safe := r.Method == http.MethodGet || r.Method == http.MethodHead
			auth := r.Header.Get("Authorization")
			switch {
			case auth == "" && safe:
				// Nobody: reads what anyone may read.
			case auth == "":
				s.unauthorized(w, "this call needs the daemon's API token over TCP: send it as Authorization: Bearer TOKEN")
				return
			case strings.HasPrefix(strings.ToLower(auth), strings.ToLower(api.ProofScheme)+" "):
				if ok, why := s.validProof(r, auth, c.local.String(), maxSubmission); !ok {
					s.unauthorized(w, why)
					return
				}
				who = caller{uid: s.uid, known: true}
			case s.validToken(auth):
				who = caller{uid: s.uid, known: true}
			default:
				s.unauthorized(w, "the API token sent does not match this daemon's")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, who)))
	})
}

func (s *Server) unauthorized(w http.ResponseWriter, msg string) {
	where := "the state folder's " + api.TokenFile
	if s.tokenFile != "" {
		where = s.tokenFile
	}
	if s.token == "" {
		msg += "; this daemon has no token (it was started without --http)"
	} else {
		msg += fmt.Sprintf(" (tessera up --http wrote it to %s, readable by the daemon's user only; the tessera CLI reads it from there, or from %s)", where, api.TokenEnv)
	}
	w.Header().Add("WWW-Authenticate", api.ProofScheme+` realm="tessera"`)
	w.Header().Add("WWW-Authenticate", `Bearer realm="tessera"`)
	writeJSON(w, http.StatusUnauthorized, api.Error{Error: msg})
}

// validToken compares the bearer token in constant time (of the token's
// SHA-256, so that its length does not leak either).
func (s *Server) validToken(auth string) bool {
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || s.token == "" {
		return false
	}
	got, want := sha256.Sum256([]byte(strings.TrimSpace(tok))), sha256.Sum256([]byte(s.token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// hostsOf lists the Host header values that name the daemon on a TCP
// listener, lower case: the address it accepted the connection on
// (127.0.0.1:9400, [::1]:9400) and localhost:PORT.
func hostsOf(local *net.TCPAddr) []string {
	port := strconv.Itoa(local.Port)
	hosts := []string{strings.ToLower(net.JoinHostPort(local.IP.String(), port)), "localhost:" + port}
	if port == "80" {
		// Clients leave the default port out of Host.
		hosts = append(hosts, strings.ToLower(local.IP.String()), "localhost")
		if local.IP.To4() == nil {
			hosts = append(hosts, "["+local.IP.String()+"]")
		}
	}
	return hosts
}

// ownOrigin reports whether origin is the daemon's own: an http origin
// naming a loopback host. Over TCP it must name this listener (any of
// hostsOf); on the unix socket, which no browser reaches but a local proxy
// might expose, it must name the request's own Host.
func (s *Server) ownOrigin(origin, host string, c conn) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.Path != "" || u.User != nil {
		return false
	}
	if !loopbackName(u.Hostname()) {
		return false
	}
	h := strings.ToLower(u.Host)
	if c.unix {
		return h == strings.ToLower(host)
	}
	return slices.Contains(hostsOf(c.local), h)
}

func loopbackName(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// jsonBody checks a POST's Content-Type: application/json (parameters
// such as charset allowed); a POST without a body may send none.
func jsonBody(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("Content-Type %q: a POST body must be application/json", ct)
	}
	return nil
}
