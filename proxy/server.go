// Package proxy is factgate's server: it receives OpenAI-compatible requests on
// fasthttp, routes chat completions by model through their route's interceptor
// chain, forwards everything else transparently, and serves health, readiness,
// metrics and the factgate API.
package proxy

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/abtest"
	"github.com/factgate/factgate/knowledge"
)

// Server is the factgate proxy. Create it with New, run it with Serve or
// ListenAndServe, stop it with Shutdown.
type Server struct {
	cfg     *Config
	log     *slog.Logger
	metrics *metrics

	upstreams    map[string]*upstream
	routes       map[string]*route // by model alias
	routeByName  map[string]*route
	defaultRoute *route
	passUp       *upstream // where non-chat paths go: the default route's upstream, else the first route's
	passMetrics  *routeMetrics

	keys []clientKey

	api        map[string]fasthttp.RequestHandler // exact paths under /factgate/
	apiPrefix  map[string]fasthttp.RequestHandler // path prefixes under /factgate/ ("/factgate/v1/traces/")
	readiness  []ReadinessCheck
	closers    []func() error
	metricsH   fasthttp.RequestHandler
	accessLog  bool
	debugBody  bool
	probeAfter time.Duration

	srv      *fasthttp.Server
	draining atomic.Bool
	traces   TraceStore

	cache   cache.Cache
	library *knowledge.Library

	allowMissingSecrets bool
	warnings            []string
	late                []Option // options that need the routes built
}

// ReadinessCheck reports one dependency's state for /readyz. A check that is not ok
// makes the proxy "degraded" (still serving), not unready.
type ReadinessCheck func() (name string, ok bool, detail string)

// TraceStore keeps request traces for GET /factgate/v1/traces/{id}.
type TraceStore interface {
	SaveTrace(ctx context.Context, t *interceptors.Trace) error
	LoadTrace(ctx context.Context, id string) ([]byte, bool, error)
}

type clientKey struct {
	name string
	key  []byte
}

// route is one configured route with its built chain.
type route struct {
	name          string
	up            *upstream
	upstreamModel string
	chain         []interceptors.Interceptor
	hasResponse   bool // at least one response phase: answers are buffered
	streamReason  bool
	metrics       *routeMetrics
}

// Option configures a Server.
type Option func(*Server) error

// WithLogger sets the logger (default: JSON to stderr at the configured level).
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) error { s.log = l; return nil }
}

// WithChain sets a route's interceptor chain directly (first = outermost),
// replacing what its config would build. Tests and embedders use it.
func WithChain(routeName string, chain ...interceptors.Interceptor) Option {
	return func(s *Server) error {
		s.late = append(s.late, withChain(routeName, chain))
		return nil
	}
}

func withChain(routeName string, chain []interceptors.Interceptor) Option {
	return func(s *Server) error {
		rt, ok := s.routeByName[routeName]
		if !ok {
			return fmt.Errorf("WithChain: no route named %q", routeName)
		}
		rt.setChain(chain)
		return nil
	}
}

// WithAPI serves handler at path under /factgate/ (a path ending in "/" matches
// every path below it). The factgate API shares the proxy's auth.
func WithAPI(path string, handler fasthttp.RequestHandler) Option {
	return func(s *Server) error { s.HandleAPI(path, handler); return nil }
}

// WithReadiness adds a readiness check.
func WithReadiness(c ReadinessCheck) Option {
	return func(s *Server) error { s.readiness = append(s.readiness, c); return nil }
}

// WithCache makes the server use c instead of building the cache its config
// describes. The caller closes c.
func WithCache(c cache.Cache) Option {
	return func(s *Server) error { s.cache = c; return nil }
}

// WithTraceStore keeps traces of intercepted requests.
func WithTraceStore(t TraceStore) Option {
	return func(s *Server) error { s.traces = t; return nil }
}

// allowMissingSecrets makes missing secrets warnings (config check).
func allowMissingSecrets() Option {
	return func(s *Server) error { s.allowMissingSecrets = true; return nil }
}

// CheckConfig loads a config file and builds everything it names without
// serving. Missing secrets are returned as warnings, not errors.
func CheckConfig(path string) (warnings []string, err error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	s, err := New(cfg, allowMissingSecrets(), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range s.closers {
		_ = c()
	}
	return s.warnings, nil
}

// New builds a server from a validated config. It resolves secrets from the
// environment and fails when one is missing.
func New(cfg *Config, opts ...Option) (*Server, error) {
	s := &Server{
		cfg:         cfg,
		metrics:     newMetrics(),
		upstreams:   map[string]*upstream{},
		routes:      map[string]*route{},
		routeByName: map[string]*route{},
		api:         map[string]fasthttp.RequestHandler{},
		apiPrefix:   map[string]fasthttp.RequestHandler{},
		accessLog:   cfg.Log.Access == nil || *cfg.Log.Access,
		debugBody:   cfg.Log.DebugBodies,
		probeAfter:  time.Duration(cfg.Server.DisconnectProbeAfter),
	}
	if s.log == nil {
		s.log = newLogger(cfg.Log)
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	for name, uc := range cfg.Upstreams {
		up, err := newUpstream(name, uc)
		if err != nil {
			return nil, err
		}
		if uc.APIKeyEnv != "" && up.apiKey == "" && cfg.Auth.Mode == "keys" {
			if s.allowMissingSecrets {
				s.warnings = append(s.warnings, fmt.Sprintf("upstreams.%s.api_key_env: %s is not set", name, uc.APIKeyEnv))
			} else {
				return nil, fmt.Errorf("upstreams.%s.api_key_env: environment variable %s is not set (auth mode keys needs the upstream key)", name, uc.APIKeyEnv)
			}
		}
		s.upstreams[name] = up
	}
	for i, k := range cfg.Auth.Keys {
		v := os.Getenv(k.KeyEnv)
		if v == "" && s.allowMissingSecrets {
			s.warnings = append(s.warnings, fmt.Sprintf("auth.keys[%d] (%s): %s is not set", i, k.Name, k.KeyEnv))
			v = "unset-" + k.Name
		}
		if v == "" {
			return nil, fmt.Errorf("auth.keys[%d] (%s): environment variable %s is not set", i, k.Name, k.KeyEnv)
		}
		s.keys = append(s.keys, clientKey{name: k.Name, key: []byte(v)})
	}
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		rt := &route{
			name:          rc.Name,
			up:            s.upstreams[rc.Upstream],
			upstreamModel: rc.UpstreamModel,
			streamReason:  rc.StreamReasoning,
			metrics:       s.metrics.forRoute(rc.Name),
		}
		s.routeByName[rc.Name] = rt
		for _, m := range rc.Models {
			s.routes[m] = rt
		}
		if rc.Default {
			s.defaultRoute = rt
		}
	}
	if s.defaultRoute != nil {
		s.passUp = s.defaultRoute.up
	} else if len(cfg.Routes) > 0 {
		s.passUp = s.routeByName[cfg.Routes[0].Name].up
	}
	s.passMetrics = s.metrics.forRoute("passthrough")
	if s.cache == nil {
		c, err := cache.New(cfg.Cache, s.metrics.reg, s.log)
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		s.cache = c
		s.closers = append(s.closers, c.Close)
	}
	s.readiness = append(s.readiness, func() (string, bool, string) {
		st := s.cache.Status()
		detail := st.Backend
		if st.Degraded {
			detail += " degraded, serving from memory: " + st.LastError
		}
		return "cache", !st.Degraded, detail
	})
	if s.library == nil {
		lib, err := s.newLibrary()
		if err != nil {
			return nil, err
		}
		s.library = lib
		s.closers = append(s.closers, lib.Close)
	}
	s.readiness = append(s.readiness, func() (string, bool, string) {
		for _, st := range s.library.OverlayStatus() {
			if st.LastError != "" {
				return "knowledge", false, fmt.Sprintf("overlay %s for %s is invalid, the last good version (v%d) stays in effect: %s", st.Path, st.Set, st.Version, st.LastError)
			}
		}
		return "knowledge", true, ""
	})
	if err := s.buildChains(); err != nil {
		return nil, err
	}
	if s.traces == nil {
		s.traces = cacheTraces{c: s.cache, ttl: time.Duration(cfg.Traces.TTL), content: cfg.Traces.Content == nil || *cfg.Traces.Content}
	}
	s.apiPrefix["/factgate/v1/traces/"] = s.handleTrace
	s.HandleAPI("/factgate/v1/check", s.checkHandler())
	s.HandleAPI(abtest.ReportPath, abtest.ReportHandler(s.experiments))
	for _, o := range s.late {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.metricsH = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	s.srv = &fasthttp.Server{
		Handler:               s.handle,
		ErrorHandler:          s.handleReadError,
		Name:                  "factgate",
		ReadBufferSize:        int(cfg.Server.MaxHeaderSize),
		MaxRequestBodySize:    int(cfg.Server.MaxRequestBody),
		ReadTimeout:           time.Duration(cfg.Server.ReadTimeout),
		IdleTimeout:           time.Duration(cfg.Server.IdleTimeout),
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		Logger:                fasthttpLogger{s.log},
	}
	return s, nil
}

func (rt *route) setChain(chain []interceptors.Interceptor) {
	rt.chain = chain
	rt.hasResponse = false
	for _, ic := range chain {
		if _, ok := ic.(interceptors.ResponsePhase); ok {
			rt.hasResponse = true
		}
	}
}

// Metrics returns the registry the proxy's metrics live in, so interceptors can
// register theirs beside them.
func (s *Server) Metrics() *prometheus.Registry { return s.metrics.reg }

// Cache returns the server's cache.
func (s *Server) Cache() cache.Cache { return s.cache }

// Library returns the server's knowledge library.
func (s *Server) Library() *knowledge.Library { return s.library }

// Logger returns the server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// HandleAPI serves handler at path under /factgate/ (see WithAPI).
func (s *Server) HandleAPI(path string, handler fasthttp.RequestHandler) {
	if len(path) > 0 && path[len(path)-1] == '/' {
		s.apiPrefix[path] = handler
	} else {
		s.api[path] = handler
	}
}

// AddReadiness adds a readiness check.
func (s *Server) AddReadiness(c ReadinessCheck) { s.readiness = append(s.readiness, c) }

// AddCloser registers a function run at Shutdown after the listener stopped.
func (s *Server) AddCloser(f func() error) { s.closers = append(s.closers, f) }

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return s.srv.Serve(watchListener{Listener: ln, probeAfter: s.probeAfter})
}

// ListenAndServe listens on the configured address and serves until ctx is
// cancelled, then shuts down gracefully, draining in-flight requests.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Server.Listen, err)
	}
	s.log.Info("factgate serving", "listen", ln.Addr().String(), "routes", len(s.routeByName))
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.Server.ShutdownTimeout))
	defer cancel()
	return s.Shutdown(sctx)
}

// Shutdown stops accepting connections and waits for in-flight requests to finish
// (bounded by ctx), then closes upstream connections and registered closers.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.log.Info("factgate draining")
	err := s.srv.ShutdownWithContext(ctx)
	for _, up := range s.upstreams {
		up.closeIdle()
	}
	for _, c := range s.closers {
		if cerr := c(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// handle is the fasthttp handler: every request starts here.
func (s *Server) handle(rc *fasthttp.RequestCtx) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving request", "path", string(rc.Path()), "panic", fmt.Sprint(p))
			writeError(rc, interceptors.Errorf(500, "server_error", "internal_error", "internal error in factgate"))
		}
	}()
	path := rc.Path()
	switch string(path) {
	case "/v1/chat/completions":
		if rc.IsPost() {
			s.handleChat(rc)
			return
		}
	case "/healthz":
		rc.SetContentType("application/json")
		rc.SetBodyString(`{"status":"ok"}`)
		return
	case "/readyz":
		s.handleReady(rc)
		return
	case "/metrics":
		s.metricsH(rc)
		return
	}
	if bytes.HasPrefix(path, []byte("/factgate/")) {
		s.handleAPI(rc)
		return
	}
	s.handlePassthrough(rc)
}

// handleReadError answers requests fasthttp could not read (too large, bad
// headers, timeouts) with the OpenAI error envelope.
func (s *Server) handleReadError(rc *fasthttp.RequestCtx, err error) {
	var e *interceptors.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = interceptors.Errorf(413, "invalid_request_error", "request_too_large",
			"request body exceeds the limit of %d bytes (server.max_request_body)", int64(s.cfg.Server.MaxRequestBody))
	case isSmallBuffer(err):
		e = interceptors.Errorf(431, "invalid_request_error", "headers_too_large",
			"request headers exceed the limit of %d bytes (server.max_header_size)", int64(s.cfg.Server.MaxHeaderSize))
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			e = interceptors.Errorf(408, "invalid_request_error", "request_timeout", "timed out reading the request")
		} else {
			e = interceptors.Errorf(400, "invalid_request_error", "bad_request", "malformed HTTP request: %v", err)
		}
	}
	s.passMetrics.error(e.Code)
	s.passMetrics.observe(e.Status, 0, 0)
	writeError(rc, e)
}

func isSmallBuffer(err error) bool {
	var sb *fasthttp.ErrSmallBuffer
	return errors.As(err, &sb) || bytes.Contains([]byte(err.Error()), []byte("small read buffer"))
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

// handleChat serves POST /v1/chat/completions.
func (s *Server) handleChat(rc *fasthttp.RequestCtx) {
	start := time.Now()
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()

	client, aerr := s.authenticate(rc)
	if aerr != nil {
		s.fail(rc, s.passMetrics, start, aerr)
		return
	}
	body := rc.PostBody()
	if !gjson.ValidBytes(body) {
		s.fail(rc, s.passMetrics, start, &interceptors.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "request body is not valid JSON" + jsonErrorPosition(body)})
		return
	}
	model := gjson.GetBytes(body, "model")
	if model.Type != gjson.String || model.Str == "" {
		s.fail(rc, s.passMetrics, start, &interceptors.Error{Status: 400, Type: "invalid_request_error", Code: "missing_model",
			Param: "model", Message: "request has no model (a string naming the model or route alias)"})
		return
	}
	s.debugBodyLog("request body", model.Str, body)
	rt := s.routes[model.Str]
	if rt == nil {
		rt = s.defaultRoute
		if rt == nil {
			s.fail(rc, s.passMetrics, start, &interceptors.Error{Status: 404, Type: "invalid_request_error", Code: "model_not_found",
				Param: "model", Message: fmt.Sprintf("no route serves model %q and there is no default route", model.Str)})
			return
		}
	}
	if len(rt.chain) == 0 {
		out := body
		if rt.upstreamModel != "" && rt.upstreamModel != model.Str {
			out, _ = sjson.SetBytes(body, "model", rt.upstreamModel)
		}
		s.forward(rc, rt.up, rt.metrics, out, start, client)
		return
	}
	s.intercept(rc, rt, body, model.Str, client, start)
}

// handlePassthrough forwards any other path to the pass-through upstream.
func (s *Server) handlePassthrough(rc *fasthttp.RequestCtx) {
	start := time.Now()
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()
	client, aerr := s.authenticate(rc)
	if aerr != nil {
		s.fail(rc, s.passMetrics, start, aerr)
		return
	}
	if s.passUp == nil {
		s.fail(rc, s.passMetrics, start, interceptors.Errorf(404, "invalid_request_error", "not_found", "no upstream for %s", rc.Path()))
		return
	}
	s.forward(rc, s.passUp, s.passMetrics, rc.PostBody(), start, client)
}

// fail answers with a factgate error and records it.
func (s *Server) fail(rc *fasthttp.RequestCtx, rm *routeMetrics, start time.Time, e *interceptors.Error) {
	writeError(rc, e)
	rm.error(e.Code)
	total := time.Since(start)
	rm.observe(e.Status, total, 0)
	rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total))
	if s.accessLog {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "request",
			slog.String("route", rm.name), slog.Int("status", e.Status), slog.String("error", e.Code),
			slog.String("path", string(rc.Path())), slog.Float64("duration_ms", ms(total)))
	}
}

// writeError writes a factgate error as the OpenAI envelope.
func writeError(rc *fasthttp.RequestCtx, e *interceptors.Error) {
	status := e.Status
	if status == StatusClientClosed {
		// Nobody is listening; close rather than write a status clients don't know.
		rc.SetConnectionClose()
	}
	rc.Response.Reset()
	rc.SetStatusCode(status)
	rc.SetContentType("application/json")
	rc.SetBody(e.Envelope())
}

// jsonErrorPosition locates the first syntax error in b as " (line L, column C)".
func jsonErrorPosition(b []byte) string {
	off := jsonSyntaxOffset(b)
	if off < 0 {
		return ""
	}
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Sprintf(" (line %d, column %d)", line, col)
}

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

// connectionTokens returns the extra header names a Connection header declares
// hop-by-hop ("Connection: keep-alive, X-Trace" -> X-Trace), or nil.
func connectionTokens(h interface{ Peek(string) []byte }) [][]byte {
	v := h.Peek("Connection")
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
// ownKey forces the upstream's own key (api_key_env) instead of the client's
// Authorization: the client's credentials belong to the route's provider and never
// go to another one (an LLM-backed validator's judge on a different upstream).
func (s *Server) copyRequestHeaders(dst *fasthttp.RequestHeader, src *fasthttp.RequestHeader, up *upstream, buffered, ownKey bool) {
	useOwn := len(s.keys) > 0 || ownKey
	extra := connectionTokens(src)
	for k, v := range src.All() {
		if skipRequestHeader(k, useOwn, buffered) || (extra != nil && containsFold(extra, k)) {
			continue
		}
		dst.AddBytesKV(k, v)
	}
	dst.SetHost(up.hostHeader)
	if up.apiKey != "" && (useOwn || len(src.Peek("Authorization")) == 0) {
		dst.Set("Authorization", "Bearer "+up.apiKey)
	}
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

// isStreamed decides whether an upstream response is relayed while it arrives:
// event streams always, bodies of unknown or large size too.
func isStreamed(h *fasthttp.ResponseHeader) bool {
	if isEventStream(h.ContentType()) {
		return true
	}
	cl := h.ContentLength()
	return cl < 0 || cl > 1<<20
}

// forward relays one request to up and the answer back, streaming when the
// answer is a stream or large.
func (s *Server) forward(rc *fasthttp.RequestCtx, up *upstream, rm *routeMetrics, body []byte, start time.Time, client string) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.Header.SetMethodBytes(rc.Method())
	uri := up.targetURI(make([]byte, 0, 64), rc.Path(), rc.URI().QueryString())
	req.Header.SetRequestURIBytes(uri)
	s.copyRequestHeaders(&req.Header, &rc.Request.Header, up, false, false)
	req.SetBodyRaw(body)

	ctx, cancel := context.WithCancelCause(context.Background())
	wc, _ := rc.Conn().(*watchConn)
	if wc != nil {
		wc.arm(cancel)
	}
	upStart := time.Now()
	cl, err := up.do(ctx, req, resp, isStreamed, 0)
	fasthttp.ReleaseRequest(req)
	if err != nil {
		if wc != nil {
			wc.disarm()
		}
		if context.Cause(ctx) == errClientGone {
			err = context.Canceled
		}
		cancel(nil)
		fasthttp.ReleaseResponse(resp)
		e := upstreamError(up.name, err)
		rm.error(e.Code)
		total := time.Since(start)
		rm.observe(e.Status, total, time.Since(upStart))
		writeError(rc, e)
		rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total-time.Since(upStart)))
		s.logAccess(rm.name, rc, e.Status, total, time.Since(upStart), client, e.Code)
		return
	}
	upHeaders := time.Since(upStart)
	copyResponseHeaders(&rc.Response.Header, &resp.Header)
	if !cl.stream {
		rc.Response.SetBody(resp.Body())
		cl.Close(true)
		fasthttp.ReleaseResponse(resp)
		if wc != nil {
			wc.disarm()
		}
		cancel(nil)
		total := time.Since(start)
		rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total-upHeaders))
		rm.observe(rc.Response.StatusCode(), total, upHeaders)
		s.logAccess(rm.name, rc, rc.Response.StatusCode(), total, upHeaders, client, "")
		return
	}
	overhead := time.Since(start) - upHeaders
	rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(overhead))
	status := rc.Response.StatusCode()
	// fasthttp reads the body from relayBody on the connection's goroutine and writes
	// each read as one flushed chunk, so events reach the client as they arrive.
	rc.Response.SetBodyStream(&relayBody{cl: cl, r: cl.body(), done: func(complete, clientGone bool) {
		cl.Close(complete)
		fasthttp.ReleaseResponse(resp)
		if wc != nil {
			wc.disarm()
		}
		if context.Cause(ctx) == errClientGone {
			clientGone = true
		}
		cancel(nil)
		total := time.Since(start)
		st := status
		switch {
		case clientGone:
			st = StatusClientClosed
			rm.error("client_closed_request")
		case !complete:
			rm.error("upstream_stream_broken")
		}
		rm.observe(st, total, total-overhead)
		s.logAccess(rm.name, rc, st, total, total-overhead, client, "")
	}}, -1)
}

// relayBody is the client response body of a streamed pass-through: it reads the
// upstream body. When the upstream breaks off, its Read returns the error and
// fasthttp closes the client connection without the final chunk, so the client
// sees a truncated stream rather than a clean end.
type relayBody struct {
	cl     *call
	r      io.Reader
	eof    bool
	broken bool // the upstream read failed
	closed bool
	done   func(complete, clientGone bool)
}

func (b *relayBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	} else if err != nil {
		b.broken = true
	}
	return n, err
}

// CloseWithError is called by fasthttp once the body is written or writing failed
// (werr: the client went away).
func (b *relayBody) CloseWithError(werr error) error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.done(b.eof && werr == nil, werr != nil && !b.broken)
	return nil
}

func (s *Server) logAccess(route string, rc *fasthttp.RequestCtx, status int, total, upstream time.Duration, client, errCode string) {
	if !s.accessLog {
		return
	}
	attrs := []slog.Attr{
		slog.String("route", route),
		slog.String("method", string(rc.Method())),
		slog.String("path", string(rc.Path())),
		slog.Int("status", status),
		slog.Float64("duration_ms", ms(total)),
		slog.Float64("upstream_ms", ms(upstream)),
	}
	if client != "" {
		attrs = append(attrs, slog.String("client", client))
	}
	if errCode != "" {
		attrs = append(attrs, slog.String("error", errCode))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// formatOverhead renders the X-Factgate-Overhead header value: milliseconds with
// microsecond precision ("0.412ms").
func formatOverhead(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return strconv.FormatFloat(ms(d), 'f', 3, 64) + "ms"
}

// handleReady serves /readyz: 200 "ready" or "degraded" (serving, with failing
// checks named), 503 while draining.
func (s *Server) handleReady(rc *fasthttp.RequestCtx) {
	rc.SetContentType("application/json")
	if s.draining.Load() {
		rc.SetStatusCode(503)
		rc.SetBodyString(`{"status":"draining"}`)
		return
	}
	status := "ready"
	checks := map[string]any{}
	for _, c := range s.readiness {
		name, ok, detail := c()
		entry := map[string]any{"ok": ok}
		if detail != "" {
			entry["detail"] = detail
		}
		checks[name] = entry
		if !ok {
			status = "degraded"
		}
	}
	b, _ := jsonMarshal(map[string]any{"status": status, "checks": checks})
	rc.SetBody(b)
}

// handleAPI serves the factgate API under /factgate/ (auth as for the proxy).
func (s *Server) handleAPI(rc *fasthttp.RequestCtx) {
	start := time.Now()
	if _, aerr := s.authenticate(rc); aerr != nil {
		s.fail(rc, s.passMetrics, start, aerr)
		return
	}
	p := string(rc.Path())
	if h, ok := s.api[p]; ok {
		h(rc)
		return
	}
	for prefix, h := range s.apiPrefix {
		if len(p) > len(prefix) && p[:len(prefix)] == prefix {
			h(rc)
			return
		}
	}
	writeError(rc, interceptors.Errorf(404, "invalid_request_error", "not_found", "no factgate endpoint at %s", p))
}

type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn("fasthttp", "msg", fmt.Sprintf(format, args...))
}
