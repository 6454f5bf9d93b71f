package proxy

import (
	"bytes"
	"crypto/subtle"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

type clientKey struct {
	name string
	key  []byte
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
