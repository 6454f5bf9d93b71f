package proxy

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// hop-by-hop and proxy-owned headers never cross the proxy.
func skipRequestHeader(k []byte, keysAuth, buffered bool) bool {
	if len(k) > 11 && bytes.EqualFold(k[:11], []byte("x-factgate-")) {
		return true
	}
	switch len(k) {
	case 2:
		return bytes.EqualFold(k, []byte("te"))
	case 4:
		return bytes.EqualFold(k, []byte("host"))
	case 7:
		return bytes.EqualFold(k, []byte("trailer")) || bytes.EqualFold(k, []byte("upgrade"))
	case 10:
		return bytes.EqualFold(k, []byte("connection")) || bytes.EqualFold(k, []byte("keep-alive"))
	case 13:
		return keysAuth && bytes.EqualFold(k, []byte("authorization"))
	case 14:
		return bytes.EqualFold(k, []byte("content-length"))
	case 15:
		return buffered && bytes.EqualFold(k, []byte("accept-encoding"))
	case 16:
		return bytes.EqualFold(k, []byte("proxy-connection"))
	case 17:
		return bytes.EqualFold(k, []byte("transfer-encoding"))
	case 18:
		return bytes.EqualFold(k, []byte("proxy-authenticate"))
	case 19:
		return bytes.EqualFold(k, []byte("proxy-authorization"))
	}
	return false
}

func skipResponseHeader(k []byte) bool {
	switch len(k) {
	case 2:
		return bytes.EqualFold(k, []byte("te"))
	case 7:
		return bytes.EqualFold(k, []byte("trailer")) || bytes.EqualFold(k, []byte("upgrade"))
	case 10:
		return bytes.EqualFold(k, []byte("connection")) || bytes.EqualFold(k, []byte("keep-alive"))
	case 14:
		return bytes.EqualFold(k, []byte("content-length"))
	case 16:
		return bytes.EqualFold(k, []byte("proxy-connection"))
	case 17:
		return bytes.EqualFold(k, []byte("transfer-encoding"))
	case 18:
		return bytes.EqualFold(k, []byte("proxy-authenticate"))
	}
	return false
}

// Header names in fasthttp's canonical form, which it would normalize them to:
// looked up and set on every request without normalizing them again.
var (
	headerConnection    = []byte(fasthttp.HeaderConnection)
	headerAuthorization = []byte(fasthttp.HeaderAuthorization)
	headerTraceID       = []byte("X-Factgate-Trace-Id")
	headerOverhead      = []byte("X-Factgate-Overhead")
	headerUpstream      = []byte(HeaderUpstream)
)

// connectionTokens returns the extra header names a Connection header declares
// hop-by-hop ("Connection: keep-alive, X-Trace" -> X-Trace), or nil.
func connectionTokens(h interface{ PeekCanonical([]byte) []byte }) [][]byte {
	v := h.PeekCanonical(headerConnection)
	if len(v) == 0 {
		return nil
	}
	var out [][]byte
	for _, t := range bytes.Split(v, []byte(",")) {
		t = bytes.TrimSpace(t)
		if len(t) == 0 || bytes.EqualFold(t, []byte("keep-alive")) || bytes.EqualFold(t, []byte("close")) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func containsFold(list [][]byte, k []byte) bool {
	for _, t := range list {
		if bytes.EqualFold(t, k) {
			return true
		}
	}
	return false
}

// copyRequestHeaders copies the client's end-to-end headers onto an upstream
// request and sets the upstream's host and credentials.
//
// ownKey forces the upstream's own key instead of the client's Authorization: the
// client's credentials belong to the route's first provider and never go to
// another one (a fallback, an LLM-backed validator's judge on a different
// upstream). key is the provider key picked for this attempt ("" for none); it is
// sent when the upstream's own key is due (auth mode keys, ownKey, or a client
// without an Authorization header).
func (s *Server) copyRequestHeaders(dst *fasthttp.RequestHeader, src *fasthttp.RequestHeader, up *upstream, key string, buffered, ownKey bool) {
	useOwn := len(s.keys) > 0 || ownKey
	extra := connectionTokens(src)
	for k, v := range src.All() {
		if skipRequestHeader(k, useOwn, buffered) || (extra != nil && containsFold(extra, k)) {
			continue
		}
		dst.AddBytesKV(k, v)
	}
	dst.SetHost(up.hostHeader)
	if key != "" && (useOwn || len(src.PeekCanonical(headerAuthorization)) == 0) {
		dst.Set("Authorization", "Bearer "+key)
	}
}

// usesOwnKey reports whether a call to an upstream sends the upstream's own key
// rather than the client's credentials (see copyRequestHeaders).
func (s *Server) usesOwnKey(src *fasthttp.RequestHeader, ownKey bool) bool {
	return len(s.keys) > 0 || ownKey || len(src.PeekCanonical(headerAuthorization)) == 0
}

func copyResponseHeaders(dst *fasthttp.ResponseHeader, src *fasthttp.ResponseHeader) {
	dst.SetStatusCode(src.StatusCode())
	extra := connectionTokens(src)
	for k, v := range src.All() {
		if skipResponseHeader(k) || (extra != nil && containsFold(extra, k)) {
			continue
		}
		dst.AddBytesKV(k, v)
	}
}
