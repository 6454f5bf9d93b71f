package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// CookieName is the browser session cookie.
const CookieName = "factgate_session"

// CSRFHeader must accompany every request that changes something and is
// authenticated by the session cookie (and the login itself). A page on another
// origin cannot send a custom header without a CORS preflight, which factgate never
// grants, so the header proves the request came from the console's own pages.
const CSRFHeader = "X-Factgate-Console"

// Viewer is who is asking: a client key (by name), an admin, or — in auth mode
// passthrough, without login — an anonymous reader.
type Viewer struct {
	// Name is the client key's name ("" for an anonymous reader).
	Name string `json:"name"`
	// Admin may read every request and trace and edit knowledge.
	Admin bool `json:"admin"`
	// Anonymous is a reader in auth mode passthrough who did not log in.
	Anonymous bool `json:"anonymous,omitempty"`
	// Session reports that the viewer was authenticated by the session cookie.
	Session bool `json:"session,omitempty"`
}

// MayRead reports whether the viewer may read a request or trace made by the
// client key named owner. This is the one place that decides it: an admin reads
// everything, anyone else only what their own key made. In auth mode passthrough
// requests have no owner ("") and the anonymous reader has no name, so the
// read-only console shows them all to anyone who reaches it. That is what
// console.enabled opts into there (off by default, warned of at start-up); the
// trace API itself still gives a trace only to the credential that made its
// request.
func (v Viewer) MayRead(owner string) bool { return v.Admin || v.Name == owner }

// MayEdit reports whether the viewer may edit knowledge overlays.
func (v Viewer) MayEdit() bool { return v.Admin }

type viewerKey struct{}

// SetViewer stores the authenticated viewer on the request for the handlers.
func SetViewer(rc *fasthttp.RequestCtx, v Viewer) { rc.SetUserValue(viewerKey{}, v) }

// ViewerFrom returns the viewer SetViewer stored; ok is false when none was.
func ViewerFrom(rc *fasthttp.RequestCtx) (Viewer, bool) {
	v, ok := rc.UserValue(viewerKey{}).(Viewer)
	return v, ok
}

// Key is a key that may log in: a client key (auth mode keys) or the console's
// admin key (passthrough).
type Key struct {
	Name   string
	Secret []byte
	Admin  bool
}

type keyHash struct {
	name  string
	sum   [sha256.Size]byte
	admin bool
}

// keyRing holds the keys' hashes only.
type keyRing []keyHash

func newKeyRing(keys []Key) keyRing {
	out := make(keyRing, 0, len(keys))
	for _, k := range keys {
		if len(k.Secret) == 0 {
			continue
		}
		out = append(out, keyHash{name: k.Name, sum: sha256.Sum256(k.Secret), admin: k.Admin})
	}
	return out
}

// match finds the key tok is, comparing against every key in constant time so
// that the time taken says nothing about which matched.
func (r keyRing) match(tok []byte) (keyHash, bool) {
	sum := sha256.Sum256(tok)
	found, ok := keyHash{}, false
	for _, k := range r {
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			found, ok = k, true
		}
	}
	return found, ok
}

func (r keyRing) byName(name string) (keyHash, bool) {
	for _, k := range r {
		if k.name == name {
			return k, true
		}
	}
	return keyHash{}, false
}

func bearer(rc *fasthttp.RequestCtx) []byte {
	tok := rc.Request.Header.Peek("Authorization")
	if len(tok) > 7 && bytes.EqualFold(tok[:7], []byte("Bearer ")) {
		return tok[7:]
	}
	return nil
}

// Authenticate says who is asking: a Bearer key, else the session cookie, else —
// in auth mode passthrough — the anonymous reader. In auth mode keys a request
// without either is 401, as for the rest of the factgate API. A request that
// changes something on the strength of the cookie must carry CSRFHeader (403).
func (c *Console) Authenticate(rc *fasthttp.RequestCtx) (Viewer, *interceptors.Error) {
	if tok := bearer(rc); tok != nil {
		if k, ok := c.keys.match(tok); ok {
			return Viewer{Name: k.name, Admin: k.admin}, nil
		}
		if !c.keysMode {
			// In passthrough the Bearer is the client's provider key, on its way
			// upstream; it says nothing about the console.
			return Viewer{Anonymous: true}, nil
		}
		return Viewer{}, interceptors.Errorf(401, "authentication_error", "invalid_api_key", "invalid API key")
	}
	if cookie := rc.Request.Header.Cookie(CookieName); len(cookie) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if k, _, ok := c.sessions.lookup(ctx, cookie, c.keys); ok {
			if !rc.IsGet() && !rc.IsHead() && len(rc.Request.Header.Peek(CSRFHeader)) == 0 {
				return Viewer{}, interceptors.Errorf(403, "permission_error", "csrf_header_missing",
					"a request authenticated by the console session must send the %s header", CSRFHeader)
			}
			return Viewer{Name: k.name, Admin: k.admin, Session: true}, nil
		}
		if c.keysMode {
			return Viewer{}, interceptors.Errorf(401, "authentication_error", "session_expired", "the console session has expired or was ended: log in again")
		}
	}
	if !c.keysMode {
		return Viewer{Anonymous: true}, nil
	}
	return Viewer{}, interceptors.Errorf(401, "authentication_error", "missing_api_key", "missing API key: send Authorization: Bearer <key>, or log in to the console")
}

// handleSession serves /factgate/v1/session: GET says who is logged in, POST
// {"key": "..."} logs in (sets the session cookie), DELETE logs out. It does its
// own authentication, so that the login form can reach it.
func (c *Console) handleSession(rc *fasthttp.RequestCtx) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	switch {
	case rc.IsGet() || rc.IsHead():
		v, err := c.Authenticate(rc)
		if err != nil {
			writeError(rc, err)
			return
		}
		SetViewer(rc, v)
		c.writeSession(rc, v, time.Time{})
	case rc.IsPost():
		if len(rc.Request.Header.Peek(CSRFHeader)) == 0 {
			writeError(rc, interceptors.Errorf(403, "permission_error", "csrf_header_missing", "log in from the console page (the %s header is missing)", CSRFHeader))
			return
		}
		var body struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal(rc.PostBody(), &body); err != nil || body.Key == "" {
			writeError(rc, interceptors.Errorf(400, "invalid_request_error", "bad_request", `send {"key": "<client key>"}`))
			return
		}
		remote := rc.RemoteIP()
		addr, prefix := c.throttle.subjects(remote, body.Key)
		if wait, throttled := c.throttle.refused(addr, prefix); throttled {
			c.throttle.note(remote.String())
			rc.Response.Header.Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
			writeError(rc, interceptors.Errorf(429, "requests", "login_throttled",
				"too many failed logins from this address or with keys like this one; try again in %s", wait.Round(time.Second)))
			return
		}
		k, ok := c.keys.match([]byte(body.Key))
		if !ok {
			c.throttle.failed(ctx, addr, prefix)
			c.throttle.note(remote.String())
			writeError(rc, interceptors.Errorf(401, "authentication_error", "invalid_api_key", "invalid key"))
			return
		}
		token, exp, err := c.sessions.create(ctx, k)
		if err != nil {
			writeError(rc, interceptors.Errorf(503, "server_error", "session_store_unavailable", "could not store the session: %v", err))
			return
		}
		c.setCookie(rc, token, exp)
		c.log.Info("console login", "who", k.name, "admin", k.admin, "remote", remote.String())
		v := Viewer{Name: k.name, Admin: k.admin, Session: true}
		SetViewer(rc, v)
		c.writeSession(rc, v, exp)
	case rc.IsDelete():
		if len(rc.Request.Header.Peek(CSRFHeader)) == 0 {
			writeError(rc, interceptors.Errorf(403, "permission_error", "csrf_header_missing", "log out from the console page (the %s header is missing)", CSRFHeader))
			return
		}
		if cookie := rc.Request.Header.Cookie(CookieName); len(cookie) > 0 {
			if k, _, ok := c.sessions.lookup(ctx, cookie, c.keys); ok {
				c.log.Info("console logout", "who", k.name)
				SetViewer(rc, Viewer{Name: k.name, Admin: k.admin, Session: true})
			}
			_ = c.sessions.delete(ctx, cookie)
		}
		c.setCookie(rc, "", time.Time{})
		rc.SetStatusCode(204)
	default:
		rc.Response.Header.Set("Allow", "GET, POST, DELETE")
		writeError(rc, interceptors.Errorf(405, "invalid_request_error", "method_not_allowed", "use GET, POST or DELETE on %s", SessionPath))
	}
}

func (c *Console) writeSession(rc *fasthttp.RequestCtx, v Viewer, exp time.Time) {
	out := struct {
		Viewer
		AuthMode string     `json:"auth_mode"`
		CanEdit  bool       `json:"can_edit"`
		CanLogin bool       `json:"can_login"`
		Expires  *time.Time `json:"expires,omitempty"`
	}{Viewer: v, AuthMode: c.authMode(), CanEdit: v.MayEdit(), CanLogin: len(c.keys) > 0}
	if !exp.IsZero() {
		out.Expires = &exp
	}
	writeJSON(rc, 200, out)
}

func (c *Console) authMode() string {
	if c.keysMode {
		return "keys"
	}
	return "passthrough"
}

// setCookie sets the session cookie (an empty token expires it).
func (c *Console) setCookie(rc *fasthttp.RequestCtx, token string, exp time.Time) {
	ck := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(ck)
	ck.SetKey(CookieName)
	ck.SetValue(token)
	ck.SetPath("/factgate/")
	ck.SetHTTPOnly(true)
	ck.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	// Secure behind TLS, terminated here or at a proxy that says so.
	ck.SetSecure(rc.IsTLS() || bytes.EqualFold(rc.Request.Header.Peek("X-Forwarded-Proto"), []byte("https")))
	if token == "" {
		ck.SetMaxAge(-1)
	} else {
		ck.SetMaxAge(int(time.Until(exp).Seconds()))
	}
	rc.Response.Header.SetCookie(ck)
}
