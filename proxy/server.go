// Package proxy is factgate's server: it receives OpenAI-compatible requests on
// fasthttp, routes chat completions by model through their route's interceptor
// chain, forwards everything else transparently, and serves health, readiness,
// metrics and the factgate API.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/configs/strictyaml"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/proxy/console"
	"github.com/factgate/factgate/proxy/telemetry"
)

// Server is the factgate proxy. Create it with New, run it with Serve or
// ListenAndServe, stop it with Shutdown.
type Server struct {
	cfg     *Config
	log     *slog.Logger
	metrics *metrics
	// started is when the server was built: the "created" of the route aliases in
	// the model list.
	started time.Time

	upstreams    map[string]*upstream
	routes       map[string]*route // by model alias
	routeByName  map[string]*route
	defaultRoute *route
	passUp       *upstream // where non-chat paths go: the default route's upstream, else the first route's
	passTargets  []target  // passUp's route's upstreams, in order
	passMetrics  *routeMetrics
	limiter      *rateLimiter // nil: no client key has a rate limit
	// now is the clock of the rate limit windows (tests fix it).
	now func() time.Time

	keys []clientKey

	api        map[string]fasthttp.RequestHandler // exact paths under /factgate/
	apiPrefix  apiPrefixes                        // path prefixes under /factgate/ ("/factgate/v1/traces/")
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
	console *console.Console // nil when the console is off

	allowMissingSecrets bool
	warnings            []string
	late                []Option // options that need the routes built

	// stages are the stages every route's chain is built from, in chain order:
	// chainStages unless a test registers its own.
	stages []interceptors.Stage
	// background tracks the proxy's own writes that outlive an answer (trace
	// saves); Shutdown waits for them before the cache closes.
	background sync.WaitGroup
	// heldCommit, set by tests only, replaces a held stream's first
	// keep-alive interval: its headers go out when the returned channel fires
	// (unless the chain finished first), so that a test decides what is known by
	// then instead of racing a timer.
	heldCommit func() <-chan time.Time

	// metricsSrv serves /metrics on server.metrics_listen; nil when /metrics is
	// served on the main listener.
	metricsSrv *fasthttp.Server

	// tel exports OpenTelemetry traces; nil when tracing is off (telemetry).
	tel     *telemetry.Telemetry
	telOpts []telemetry.Option
}

// ReadinessCheck reports one dependency's state for /readyz. A check that is not ok
// makes the proxy "degraded" (still serving), not unready.
type ReadinessCheck func() (name string, ok bool, detail string)

// TraceStore keeps request traces for GET /factgate/v1/traces/{id}.
type TraceStore interface {
	SaveTrace(ctx context.Context, t *interceptors.Trace) error
	LoadTrace(ctx context.Context, id string) ([]byte, bool, error)
}

// memoryTraceStore is a TraceStore that may say its saves never wait on I/O (no
// Redis behind it): the proxy then saves a trace in the request's goroutine rather
// than in one of its own that it waits for.
type memoryTraceStore interface {
	SavesInMemory() bool
}

// route is one configured route with its built chain.
type route struct {
	name string
	up   *upstream // the first of targets
	// targets are the route's upstreams in order (fallbacks after the first).
	targets       []target
	upstreamModel string // the first upstream's model
	chain         []interceptors.Interceptor
	hasResponse   bool // at least one response phase: answers are buffered
	streamReason  bool
	responseAlias bool // response_model: alias
	metrics       *routeMetrics
	pack          string // the route's pack ("" for none)
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

// WithInnermostStage adds ic to the named route's chain after the stages its
// config builds: its request phase runs last, right before the upstream call (it
// may answer in the upstream's place), its response phase first. factgate eval
// answers each case's first draft this way.
func WithInnermostStage(routeName string, ic interceptors.Interceptor) Option {
	return func(s *Server) error {
		s.late = append(s.late, func(s *Server) error {
			rt, ok := s.routeByName[routeName]
			if !ok {
				return fmt.Errorf("WithInnermostStage: no route named %q", routeName)
			}
			rt.setChain(append(slices.Clone(rt.chain), ic))
			return nil
		})
		return nil
	}
}

// WithAPI serves handler at path under /factgate/ (a path ending in "/" matches
// every path below it; of two such prefixes the longer wins). The factgate API
// shares the proxy's auth.
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

// WithTelemetry passes options to the OpenTelemetry tracer the telemetry block
// turns on (an exporter of its own, the batching, the sampler).
func WithTelemetry(opts ...telemetry.Option) Option {
	return func(s *Server) error { s.telOpts = append(s.telOpts, opts...); return nil }
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
		return nil, err // New names the file
	}
	for _, c := range s.closers {
		_ = c()
	}
	_ = s.tel.Shutdown(context.Background()) // nothing was traced
	return s.warnings, nil
}

// New builds a server from a validated config. It resolves secrets from the
// environment and fails when one is missing. An error names the config file
// (cfg.File), then the key.
func New(cfg *Config, opts ...Option) (srv *Server, err error) {
	defer func() {
		var located *strictyaml.Error
		if err != nil && cfg.File != "" && !(errors.As(err, &located) && located.File != "") {
			err = fmt.Errorf("%s: %w", cfg.File, err)
		}
	}()
	s := &Server{
		cfg:         cfg,
		started:     time.Now(),
		metrics:     newMetrics(),
		upstreams:   map[string]*upstream{},
		routes:      map[string]*route{},
		routeByName: map[string]*route{},
		api:         map[string]fasthttp.RequestHandler{},
		accessLog:   cfg.Log.Access == nil || *cfg.Log.Access,
		debugBody:   cfg.Log.DebugBodies,
		probeAfter:  time.Duration(cfg.Server.DisconnectProbeAfter),
	}
	if s.log == nil {
		s.log = newLogger(cfg.Log)
	}
	defer func() {
		if err != nil {
			s.closeProvisioned()
		}
	}()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if s.stages == nil {
		s.stages = chainStages
	}
	for name, uc := range cfg.Upstreams {
		up, err := newUpstream(name, uc)
		if err != nil {
			return nil, err
		}
		for _, k := range uc.KeyEnvs() {
			if os.Getenv(k.Env) != "" || cfg.Auth.Mode != "keys" {
				continue
			}
			field := "api_key_env"
			if len(uc.APIKeyEnvs) > 0 {
				field = "api_key_envs"
			}
			if s.allowMissingSecrets {
				s.warnings = append(s.warnings, fmt.Sprintf("upstreams.%s.%s: %s is not set", name, field, k.Env))
			} else {
				return nil, fmt.Errorf("upstreams.%s.%s: environment variable %s is not set (auth mode keys needs the upstream key)", name, field, k.Env)
			}
		}
		up.breaker.changed = s.circuitChanged(up)
		s.metrics.circuitOpen.WithLabelValues(name).Set(0)
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
		s.keys = append(s.keys, clientKey{name: k.Name, key: []byte(v), admin: k.Admin})
	}
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		var targets []target
		for j, ru := range rc.UpstreamList() {
			up := s.upstreams[ru.Name]
			if up == nil {
				return nil, fmt.Errorf("routes[%d] (%s): no upstream named %q", i, rc.Name, ru.Name)
			}
			targets = append(targets, target{up: up, model: ru.UpstreamModel, foreign: j > 0, retry: cfg.Upstreams[ru.Name].Retry.policy(rc.Retry)})
		}
		if len(targets) == 0 {
			return nil, fmt.Errorf("routes[%d] (%s): no upstream", i, rc.Name)
		}
		rt := &route{
			name:          rc.Name,
			up:            targets[0].up,
			targets:       targets,
			upstreamModel: targets[0].model,
			streamReason:  rc.StreamReasoning,
			responseAlias: rc.ResponseModel == ResponseModelAlias,
			metrics:       s.metrics.forRoute(rc.Name),
			pack:          rc.Pack,
		}
		s.routeByName[rc.Name] = rt
		for _, m := range rc.Models {
			s.routes[m] = rt
		}
		if rc.Default {
			s.defaultRoute = rt
		}
	}
	passRoute := s.defaultRoute
	if passRoute == nil && len(cfg.Routes) > 0 {
		passRoute = s.routeByName[cfg.Routes[0].Name]
	}
	if passRoute != nil {
		s.passUp, s.passTargets = passRoute.up, passRoute.targets
	}
	s.passMetrics = s.metrics.forRoute("passthrough")
	if s.cache == nil {
		cc := cfg.Cache
		if r := cc.Redis; r != nil && r.PasswordEnv != "" && os.Getenv(r.PasswordEnv) == "" && s.allowMissingSecrets {
			s.warnings = append(s.warnings, fmt.Sprintf("cache.redis.password_env: %s is not set", r.PasswordEnv))
			noSecret := *r
			noSecret.PasswordEnv = ""
			cc.Redis = &noSecret
		}
		c, err := cache.New(cc, s.metrics.reg, s.log)
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		s.cache = c
		s.closers = append(s.closers, c.Close)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.limiter = newRateLimiter(cfg, s.cache, s.metrics, s.log, s.now)
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
		traces, closeTraces, err := newCacheTraces(s.cache, cfg.Traces, s.metrics.reg)
		if err != nil {
			return nil, fmt.Errorf("traces: %w", err)
		}
		s.traces = traces
		s.closers = append(s.closers, closeTraces)
	}
	s.apiPrefix.add("/factgate/v1/traces/", s.handleTrace)
	s.HandleAPI("/factgate/v1/check", s.checkHandler())
	s.registerStageEndpoints()
	for _, o := range s.late {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if err := s.newConsole(); err != nil {
		return nil, err
	}
	s.logUpstreamKeys()
	s.registerMemoryBudget()
	if s.tel, err = telemetry.New(cfg.Telemetry, s.metrics.reg, s.log, s.telOpts...); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	s.metricsH = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	if cfg.Server.MetricsListen != "" {
		s.metricsSrv = &fasthttp.Server{
			Handler:               s.handleMetricsListener,
			Name:                  "factgate-metrics",
			ReadTimeout:           time.Duration(cfg.Server.ReadTimeout),
			IdleTimeout:           time.Duration(cfg.Server.IdleTimeout),
			NoDefaultServerHeader: true,
			NoDefaultDate:         true,
			CloseOnShutdown:       true,
			Logger:                fasthttpLogger{s.log},
		}
		// After the main listener drained: metrics stay scrapeable while it does.
		s.closers = append(s.closers, s.metricsSrv.Shutdown)
	}
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		ErrorHandler:       s.handleReadError,
		ExpectHandler:      s.expectContinue,
		Name:               "factgate",
		ReadBufferSize:     int(cfg.Server.MaxHeaderSize),
		MaxRequestBodySize: int(cfg.Server.MaxRequestBody),
		ReadTimeout:        time.Duration(cfg.Server.ReadTimeout),
		IdleTimeout:        time.Duration(cfg.Server.IdleTimeout),
		// Without it every keep-alive connection keeps the buffer of the largest
		// body it carried (up to max_request_body) for its whole life.
		ReduceMemoryUsage:     true,
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		Logger:                fasthttpLogger{s.log},
	}
	return s, nil
}

// modelSwap gives each of the route's upstreams its model, for a request that
// asked for model; nil when the route has one upstream.
func (rt *route) modelSwap(model string) *modelSwap {
	if len(rt.targets) < 2 {
		return nil
	}
	routeModel := rt.upstreamModel
	if routeModel == "" {
		routeModel = model
	}
	return &modelSwap{route: routeModel, client: model}
}

// circuitChanged reports an upstream's circuit opening or closing: the gauge and
// a log line, the one thing an operator must hear of.
func (s *Server) circuitChanged(up *upstream) func(open bool, failures int) {
	gauge := s.metrics.circuitOpen.WithLabelValues(up.name)
	return func(open bool, failures int) {
		if open {
			gauge.Set(1)
			s.log.Warn("upstream circuit opened: no calls until the cooldown ends, then one probe", "upstream", up.name,
				"consecutive_failures", failures, "cooldown", up.breaker.cooldown.String())
			return
		}
		gauge.Set(0)
		s.log.Info("upstream circuit closed: the upstream answers again", "upstream", up.name)
	}
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

// Traces returns where the server keeps request traces.
func (s *Server) Traces() TraceStore { return s.traces }

// Cache returns the server's cache.
func (s *Server) Cache() cache.Cache { return s.cache }

// Library returns the server's knowledge library.
func (s *Server) Library() *knowledge.Library { return s.library }

// Logger returns the server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// HandleAPI serves handler at path under /factgate/ (see WithAPI).
func (s *Server) HandleAPI(path string, handler fasthttp.RequestHandler) {
	if len(path) > 0 && path[len(path)-1] == '/' {
		s.apiPrefix.add(path, handler)
	} else {
		s.api[path] = handler
	}
}

// closeProvisioned closes, last opened first, what a New that failed had
// already opened (the cache with its Redis client and probe, the knowledge
// watcher, the trace store, closers options registered): nothing of a server
// that was never returned keeps running.
func (s *Server) closeProvisioned() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			s.log.Debug("closing what a failed start opened", "error", err)
		}
	}
	s.closers = nil
	for _, up := range s.upstreams {
		up.closeIdle()
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

// ServeMetrics serves /metrics on ln until Shutdown; it is for
// server.metrics_listen, and fails when the config sets none.
func (s *Server) ServeMetrics(ln net.Listener) error {
	if s.metricsSrv == nil {
		return errors.New("server.metrics_listen is not set: /metrics is served on the main listener")
	}
	return s.metricsSrv.Serve(ln)
}

// handleMetricsListener serves the metrics listener: /metrics, nothing else.
func (s *Server) handleMetricsListener(rc *fasthttp.RequestCtx) {
	if string(rc.Path()) == "/metrics" {
		s.metricsH(rc)
		return
	}
	writeError(rc, interceptors.Errorf(404, "invalid_request_error", "not_found", "this address serves /metrics only"))
}

// ListenAndServe listens on the configured address (and on metrics_listen when
// set) and serves until ctx is cancelled, then shuts down gracefully (see
// Shutdown) within server.drain_grace plus server.shutdown_timeout.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Server.Listen, err)
	}
	errc := make(chan error, 2)
	if s.metricsSrv != nil {
		mln, err := net.Listen("tcp", s.cfg.Server.MetricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listening on %s (server.metrics_listen): %w", s.cfg.Server.MetricsListen, err)
		}
		s.log.Info("factgate serving metrics", "metrics_listen", mln.Addr().String())
		go func() { errc <- s.ServeMetrics(mln) }()
	}
	s.log.Info("factgate serving", "listen", ln.Addr().String(), "routes", len(s.routeByName))
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.Server.DrainGraceDuration()+time.Duration(s.cfg.Server.ShutdownTimeout))
	defer cancel()
	return s.Shutdown(sctx)
}

// Shutdown takes the server out of service in three steps. For
// server.drain_grace the listener stays open: /readyz answers 503 "draining", so
// that load balancers stop sending traffic, and every other new request gets 503
// shutting_down (/healthz and /metrics still answer). Then it stops accepting
// connections and waits for in-flight requests to finish. Then it waits for
// what the answered requests left to write in the background — each stage's
// (interceptors.Cleaner: A/B counters, fact indexes) and its own (traces) — so
// that a deploy loses none of it — and what Redis could not take while it
// failed (the cache's pending writes) is written now (flushPending). ctx
// bounds all of it; afterwards upstream connections and registered closers (the
// cache among them) are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	// A second Shutdown (the first one timed out) does not wait the grace again.
	if grace := s.cfg.Server.DrainGraceDuration(); !s.draining.Swap(true) && grace > 0 {
		s.log.Info("factgate draining: /readyz answers 503 before the listener closes", "drain_grace", grace.String())
		wait := time.NewTimer(grace)
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
		}
	}
	s.log.Info("factgate closing the listener and draining in-flight requests")
	err := s.srv.ShutdownWithContext(ctx)
	// Before the cache closes: a write cut off here is a lost count or trace.
	if cerr := s.cleanupStages(ctx); cerr != nil {
		s.log.Warn("a stage's background writes did not finish before the shutdown deadline; some are lost", "error", cerr)
		if err == nil {
			err = cerr
		}
	}
	if werr := interceptors.Wait(ctx, &s.background); werr != nil {
		s.log.Warn("trace saves did not finish before the shutdown deadline; some traces are lost", "error", werr)
		if err == nil {
			err = werr
		}
	}
	if ferr := s.flushPending(ctx); ferr != nil && err == nil {
		err = ferr
	}
	// The spans of every request, trace saves included, are ended: export them.
	if terr := s.tel.Shutdown(ctx); terr != nil {
		s.log.Warn("some OpenTelemetry spans were not exported before the shutdown deadline", "error", terr)
		if err == nil {
			err = terr
		}
	}
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
