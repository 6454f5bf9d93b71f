package proxy

import (
	"net/url"
	"path"
	"strings"
)

// cleanPath returns the client's request path as it goes upstream: fasthttp has
// percent-decoded it and resolved its dot segments; backslashes are read as
// slashes too (some servers do), dot and empty segments are resolved again, and
// the result is escaped, so that nothing the client encoded ("%3f", "%0d%0a",
// "%252e%252e") turns into a query, a header or a dot segment at the upstream. A
// trailing slash is kept. A path that needs none of it is returned as it is.
func cleanPath(p []byte) []byte {
	if pathIsClean(p) {
		return p
	}
	s := strings.ReplaceAll(string(p), `\`, "/")
	c := path.Clean("/" + s)
	if strings.HasSuffix(s, "/") && c != "/" {
		c += "/"
	}
	return []byte((&url.URL{Path: c}).EscapedPath())
}

// pathIsClean reports a path of unreserved characters and slashes only, without
// empty, "." or ".." segments: what cleanPath would return unchanged.
func pathIsClean(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	seg := 0 // start of the current segment
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			c := p[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
				return false
			}
			continue
		}
		switch s := p[seg+1 : i]; {
		case len(s) == 0 && i < len(p), string(s) == ".", string(s) == "..":
			return false
		}
		seg = i
	}
	return true
}

// reaches reports whether a cleaned client path maps under the upstream's base
// URL path: a path under /v1 always does (it is put under the base); any other
// path goes to the upstream unchanged, so it must itself start with the base
// path. A base URL without a path ("http://host") takes every path.
func (u *upstream) reaches(clean []byte) bool {
	if _, ok := cutV1(clean); ok {
		return true
	}
	prefix := u.pathPrefix
	if prefix == "" {
		return true
	}
	return string(clean) == prefix || len(clean) > len(prefix) && string(clean[:len(prefix)]) == prefix && clean[len(prefix)] == '/'
}

// reachesAll reports whether every one of targets (a route's upstreams, the
// fallbacks included) takes the cleaned path under its base.
func reachesAll(targets []target, clean []byte) bool {
	for _, t := range targets {
		if !t.up.reaches(clean) {
			return false
		}
	}
	return true
}
