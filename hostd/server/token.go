package server

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/tessera-gpu/tessera/hostd/api"
)

// minTokenLen is the shortest token accepted from the token file (a made
// one is 43 characters: 32 random bytes, base64url).
const minTokenLen = 32

// EnsureToken returns the API token kept in stateDir's api.TokenFile,
// first making one (32 bytes from crypto/rand, base64url, in a new file of
// mode 0600) when there is none; created says it made it. A token file
// that group or others could read, or that belongs to another user, is an
// error that says what to do.
func EnsureToken(stateDir string) (token, path string, created bool, err error) {
	path = filepath.Join(stateDir, api.TokenFile)
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", path, false, fmt.Errorf("API token: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(token + "\n")
		if serr := f.Sync(); werr == nil {
			werr = serr
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return "", path, false, fmt.Errorf("API token %s: %w", path, werr)
		}
		return token, path, true, nil
	case !errors.Is(err, fs.ErrExist):
		return "", path, false, fmt.Errorf("API token %s: %w", path, err)
	}
	token, err = readToken(path)
	return token, path, false, err
}

// readToken reads an existing token file, which must be the daemon user's
// and owner-only.
func readToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("API token %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("API token %s: must be a regular file, got mode %s; delete it and tessera up makes a new token", path, fi.Mode())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("API token %s: mode %04o lets group or others read it; run chmod 600 %s (or delete it, and tessera up makes a new token)", path, fi.Mode().Perm(), path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("API token %s: belongs to uid %d, not to this daemon's user (uid %d); delete it, and tessera up makes a new token", path, st.Uid, os.Geteuid())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("API token %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < minTokenLen || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("API token %s: must hold one token of at least %d characters; delete it, and tessera up makes a new one", path, minTokenLen)
	}
	return tok, nil
}
