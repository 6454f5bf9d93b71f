package proxy

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

type clientKey struct {
	name string
	key  []byte
	// admin reads every client's traces.
	admin bool
}

// authenticate checks the client's credentials; it returns the client key's name.
func (s *Server) authenticate(rc *fasthttp.RequestCtx) (string, *interceptors.Error) {
	if len(s.keys) == 0 {
		return "", nil
	}
	tok := rc.Request.Header.Peek("Authorization")
	if len(tok) > 7 && (bytes.EqualFold(tok[:7], []byte("Bearer "))) {
		tok = tok[7:]
	} else {
		tok = nil
	}
	name := ""
	for _, k := range s.keys {
		// Compare against every key so the time taken says nothing about which matched.
		if subtle.ConstantTimeCompare(tok, k.key) == 1 {
			name = k.name
		}
	}
	if name == "" {
		if len(tok) == 0 {
			return "", interceptors.Errorf(401, "authentication_error", "missing_api_key", "missing API key: send Authorization: Bearer <key>")
		}
		return "", interceptors.Errorf(401, "authentication_error", "invalid_api_key", "invalid API key")
	}
	return name, nil
}

// isAdmin reports whether the client key named name has the admin role.
func (s *Server) isAdmin(name string) bool {
	for _, k := range s.keys {
		if k.name == name && name != "" {
			return k.admin
		}
	}
	return false
}

// Trace owners, as a trace's Owner field holds them.
const (
	ownerKeyPrefix        = "key:"
	ownerCredentialPrefix = "credential:"
)

// requestOwner names who may read the traces of the request in rc, made by the
// client key named client: in auth mode keys the key ("key:app"); in passthrough
// mode, where the proxy issues no keys, the client's own credential — a hash of
// its Authorization header ("credential:<hex>"), so that only a request with the
// same credential reads them. "" when a passthrough client sent no credential:
// nobody can prove it made the request, so nobody reads its traces through the
// API.
func (s *Server) requestOwner(rc *fasthttp.RequestCtx, client string) string {
	if len(s.keys) > 0 {
		if client == "" {
			return ""
		}
		return ownerKeyPrefix + client
	}
	cred := bytes.TrimSpace(rc.Request.Header.Peek("Authorization"))
	if len(cred) == 0 {
		return ""
	}
	// Domain-separated, so the stored value is not the plain SHA-256 of a provider
	// key that other systems may log; 128 bits are plenty to tell credentials apart.
	h := sha256.New()
	h.Write([]byte("factgate trace owner\x00"))
	h.Write(cred)
	return ownerCredentialPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}
