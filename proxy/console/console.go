// Package console is factgate's web console: pages at /factgate/ui/ (static files
// embedded in the binary, no build step) over a JSON and SSE API under
// /factgate/v1/: the recent intercepted requests, one request's trace, the A/B
// experiment report, and the knowledge sets with their overlays.
//
// The proxy wires it (console never imports proxy): it gives the console its keys,
// its cache (for sessions), a trace loader, the knowledge library and each route's
// prompt preview, feeds it a Summary when an intercepted request finishes, and
// puts Authenticate in front of the whole factgate API, so that the browser's
// session cookie works wherever a Bearer key does.
package console

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// The console's paths.
const (
	UIPath           = "/factgate/ui/"
	SessionPath      = "/factgate/v1/session"
	RequestsPath     = "/factgate/v1/requests"
	RequestsStream   = "/factgate/v1/requests/stream"
	RequestPrefix    = "/factgate/v1/requests/" // + trace id: the request and its trace
	KnowledgePath    = "/factgate/v1/knowledge"
	KnowledgePrefix  = "/factgate/v1/knowledge/"
	knowledgeSets    = "/factgate/v1/knowledge/sets/"
	knowledgeRender  = "/factgate/v1/knowledge/render"
	sseKeepAlive     = 15 * time.Second
	drainCheckPeriod = 250 * time.Millisecond
	// sessionRecheck is how often a live feed opened with a session checks it
	// in Redis: the bound on what it delivers after the session ends elsewhere.
	sessionRecheck = time.Second
)

// Route is what the console knows of a route: its name, its pack, and — when it
// injects — the prompt it would inject for a context.
type Route struct {
	Name string
	Pack *knowledge.Pack
	// Preview returns the injected system prompt for the set and scopes; nil when
	// the route does not inject.
	Preview func(set *knowledge.Set, scopes knowledge.Scopes) string
}

// TraceLoader reads a stored trace; ok is false when there is none.
type TraceLoader func(ctx context.Context, id string) (b []byte, ok bool, err error)

// Options are what the proxy gives the console.
type Options struct {
	Config Config
	// KeysMode is auth.mode keys: every request needs a key or a session.
	KeysMode bool
	// Keys may log in: the client keys (keys mode) or the admin key (passthrough).
	Keys []Key
	// Cache keeps the sessions (shared across replicas through Redis).
	Cache cache.Cache
	// Traces reads stored traces; nil: the trace page says there are none.
	Traces TraceLoader
	// Library is the knowledge the proxy serves from.
	Library *knowledge.Library
	// Routes are the proxy's routes, in config order.
	Routes []Route
	// Log receives the audit lines (logins, knowledge edits).
	Log *slog.Logger
	// Draining reports that the proxy is shutting down: live feeds end.
	Draining func() bool
}

// Console serves the console. Create it with New; it is safe for concurrent use.
type Console struct {
	cfg      Config
	keysMode bool
	keys     keyRing
	sessions *sessionStore
	throttle *loginThrottle
	traces   TraceLoader
	lib      *knowledge.Library
	routes   []Route
	log      *slog.Logger
	draining func() bool

	recent *recentRequests

	editMu sync.Mutex // serialises overlay edits (read, change, write)
}

// New builds the console. opt.Config must have its defaults applied.
func New(opt Options) *Console {
	c := &Console{
		cfg:      opt.Config,
		keysMode: opt.KeysMode,
		keys:     newKeyRing(opt.Keys),
		traces:   opt.Traces,
		lib:      opt.Library,
		routes:   opt.Routes,
		log:      opt.Log,
		draining: opt.Draining,
		recent:   newRecentRequests(opt.Config.RecentRequests),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.draining == nil {
		c.draining = func() bool { return false }
	}
	ttl, grace := time.Duration(opt.Config.SessionTTL), DefaultOfflineSessionGrace
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	if g := opt.Config.OfflineSessionGrace; g != nil {
		grace = time.Duration(*g)
	}
	c.sessions = newSessionStore(opt.Cache, ttl, grace, c.log)
	c.throttle = newLoginThrottle(opt.Cache, opt.Config.LoginThrottle, c.log)
	// A key removed or rotated since the sessions were made ends them on every
	// replica; a Redis that fails now gets the sweep when it answers again.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	c.sessions.sweep(ctx, c.keys)
	cancel()
	if d, ok := opt.Cache.(cache.Durable); ok {
		d.OnRecover(func(ctx context.Context) { c.sessions.sweep(ctx, c.keys) })
	}
	return c
}

// RequestBytes is the bound on each client message the trace keeps for the trace
// page; 0 means keep none.
func (c *Console) RequestBytes() int {
	if c.cfg.RequestBytes == nil {
		return DefaultRequestBytes
	}
	return int(*c.cfg.RequestBytes)
}

// Public reports whether path is served without the API's authentication: the
// pages (they hold no data; they ask the API) and the session endpoint, which
// authenticates on its own so that the login form can reach it.
func Public(path []byte) bool {
	p := string(path)
	return p == SessionPath || p == "/factgate/ui" || len(p) >= len(UIPath) && p[:len(UIPath)] == UIPath
}

// ServePublic serves a path Public accepted.
func (c *Console) ServePublic(rc *fasthttp.RequestCtx) {
	if string(rc.Path()) == SessionPath {
		c.handleSession(rc)
		return
	}
	serveUI(rc)
}

// Handlers are the console's API endpoints behind the proxy's authentication
// (Authenticate, with the viewer stored by SetViewer): exact paths and path
// prefixes (ending in "/").
func (c *Console) Handlers() map[string]fasthttp.RequestHandler {
	return map[string]fasthttp.RequestHandler{
		RequestsPath:    c.withViewer(c.handleRequests),
		RequestsStream:  c.withViewer(c.handleStream),
		RequestPrefix:   c.withViewer(c.handleRequest),
		KnowledgePath:   c.withViewer(c.handleKnowledge),
		KnowledgePrefix: c.withViewer(c.handleKnowledgeSub),
	}
}

// withViewer hands the authenticated viewer to h; a request that reached it
// without one is refused (the proxy did not authenticate it).
func (c *Console) withViewer(h func(*fasthttp.RequestCtx, Viewer)) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		v, ok := ViewerFrom(rc)
		if !ok {
			var err *interceptors.Error
			if v, err = c.Authenticate(rc); err != nil {
				writeError(rc, err)
				return
			}
		}
		h(rc, v)
	}
}

func writeJSON(rc *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(rc, &interceptors.Error{Status: 500, Type: "server_error", Code: "internal_error", Message: "rendering the answer failed", Err: err})
		return
	}
	rc.SetStatusCode(status)
	rc.SetContentType("application/json")
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.SetBody(b)
}

func writeError(rc *fasthttp.RequestCtx, e *interceptors.Error) {
	rc.SetStatusCode(e.Status)
	rc.SetContentType("application/json")
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.SetBody(e.Envelope())
}

func methodNotAllowed(rc *fasthttp.RequestCtx, allow string) {
	rc.Response.Header.Set("Allow", allow)
	writeError(rc, interceptors.Errorf(405, "invalid_request_error", "method_not_allowed", "%s accepts %s, not %s", rc.Path(), allow, rc.Method()))
}
