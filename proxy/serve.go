package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
	"github.com/factgate/factgate/proxy/console"
	"github.com/factgate/factgate/proxy/telemetry"
)

// handle is the fasthttp handler: every request starts here.
func (s *Server) handle(rc *fasthttp.RequestCtx) {
	if s.tel != nil {
		if rq := s.startRequest(rc); rq != nil {
			defer endRequest(rc, rq) // after the recovery below wrote its error
		}
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving request", "path", string(rc.Path()), "panic", fmt.Sprint(p))
			writeError(rc, interceptors.Errorf(500, "server_error", "internal_error", "internal error in factgate"))
		}
	}()
	path := rc.Path()
	if s.draining.Load() && !s.servedWhileDraining(path) {
		s.fail(rc, s.passMetrics, time.Now(), interceptors.Errorf(503, "server_error", "shutting_down",
			"this factgate replica is shutting down; retry the request"))
		// Connection: close sends the client's retry to a new connection, which
		// a load balancer gives to another replica.
		rc.SetConnectionClose()
		return
	}
	switch string(path) {
	case "/v1/chat/completions":
		if rc.IsPost() {
			s.handleChat(rc)
			return
		}
	case "/v1/responses":
		if rc.IsPost() {
			s.handleResponses(rc)
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
		if s.metricsSrv != nil {
			writeError(rc, interceptors.Errorf(404, "invalid_request_error", "not_found", "/metrics is served on another address (server.metrics_listen)"))
			return
		}
		s.metricsH(rc)
		return
	}
	if bytes.HasPrefix(path, []byte("/factgate/")) {
		s.handleAPI(rc)
		return
	}
	s.handlePassthrough(rc)
}

// startRequest starts the OpenTelemetry server span of a proxied request (not of
// the probes, /metrics or the factgate API) and keeps it on rc, where
// telemetryOf finds it.
func (s *Server) startRequest(rc *fasthttp.RequestCtx) *telemetry.Request {
	switch path := rc.Path(); {
	case bytes.HasPrefix(path, []byte("/factgate/")):
		return nil
	default:
		switch string(path) {
		case "/healthz", "/readyz", "/metrics":
			return nil
		}
	}
	rq := s.tel.StartRequest(rc, time.Now())
	rc.SetUserValue(telemetry.Key, rq)
	return rq
}

// endRequest ends the server span of a request answered by the handler; a
// streamed answer ends it when the stream ends (intercept's finish, forward's
// relay).
func endRequest(rc *fasthttp.RequestCtx, rq *telemetry.Request) {
	if rc.Response.IsBodyStream() {
		return
	}
	rq.End(rc.Response.StatusCode(), "")
}

// telemetryOf is the server span of rc's request; nil when tracing is off.
func (s *Server) telemetryOf(rc *fasthttp.RequestCtx) *telemetry.Request {
	if s.tel == nil {
		return nil
	}
	rq, _ := rc.UserValue(telemetry.Key).(*telemetry.Request)
	return rq
}

// servedWhileDraining: once Shutdown began, only the probes and metrics are
// answered; /readyz says "draining".
func (s *Server) servedWhileDraining(path []byte) bool {
	switch string(path) {
	case "/readyz", "/healthz", "/metrics":
		return true
	}
	return false
}

// handleReadError answers requests fasthttp could not read (too large, bad
// headers, timeouts) with the OpenAI error envelope, and logs them like any
// other answer.
func (s *Server) handleReadError(rc *fasthttp.RequestCtx, err error) {
	var e *interceptors.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = tooLarge(int64(s.cfg.Server.MaxRequestBody), "server.max_request_body")
		// The client may still be sending the body fasthttp refused to read.
		if wc, ok := rc.Conn().(*watchConn); ok {
			wc.discardRequestOnClose()
		}
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
	if s.accessLog {
		// fasthttp has reset the request it could not read: its method and path
		// are not known.
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "request",
			slog.String("route", s.passMetrics.name), slog.Int("status", e.Status), slog.String("error", e.Code), remoteAttr(rc))
	}
}

// tooLarge is the 413 for a body over limit bytes, naming the key that sets it.
func tooLarge(limit int64, key string) *interceptors.Error {
	return interceptors.Errorf(413, "invalid_request_error", "request_too_large",
		"request body exceeds the limit of %d bytes (%s)", limit, key)
}

// checkPath is the offline check's endpoint, whose body has a bound of its own.
const checkPath = "/factgate/v1/check"

// bodyLimit returns the bound on the body of the request in rc and the key that
// sets it: server.max_check_body for a check, when it is the lower one, else
// server.max_request_body (which fasthttp enforces for every request).
func (s *Server) bodyLimit(rc *fasthttp.RequestCtx) (int64, string) {
	limit := int64(s.cfg.Server.MaxRequestBody)
	if check := int64(s.cfg.Server.MaxCheckBody); check > 0 && check < limit && string(rc.Path()) == checkPath {
		return check, "server.max_check_body"
	}
	return limit, "server.max_request_body"
}

// expectContinue answers a request that sent Expect: 100-continue: a body whose
// Content-Length is already over its bound gets the 413 at once (and the
// connection closes), instead of a 100 Continue that invites the client to send
// what is going to be refused.
func (s *Server) expectContinue(rc *fasthttp.RequestCtx) int {
	limit, key := s.bodyLimit(rc)
	if cl := rc.Request.Header.ContentLength(); cl > 0 && int64(cl) > limit {
		if wc, ok := rc.Conn().(*watchConn); ok {
			// A client that did not wait for the answer is sending the body.
			wc.discardRequestOnClose()
		}
		s.fail(rc, s.passMetrics, time.Now(), tooLarge(limit, key))
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

func isSmallBuffer(err error) bool {
	var sb *fasthttp.ErrSmallBuffer
	return errors.As(err, &sb) || bytes.Contains([]byte(err.Error()), []byte("small read buffer"))
}

// modelNotFound is the 404 for a chat completion or a Responses request whose
// model no route serves, on a config without a default route.
func modelNotFound(model string) *interceptors.Error {
	return &interceptors.Error{Status: 404, Type: "invalid_request_error", Code: "model_not_found",
		Param: "model", Message: fmt.Sprintf("no route serves model %q and there is no default route", model)}
}

// handleChat serves POST /v1/chat/completions.
func (s *Server) handleChat(rc *fasthttp.RequestCtx) {
	start := time.Now()
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()

	client, body, head, ok := s.admit(rc, start)
	if !ok {
		return
	}
	defer s.settleTokens(rc)
	model := head.model.Str
	rt := s.routeFor(model)
	if rt == nil {
		s.fail(rc, s.passMetrics, start, modelNotFound(model))
		return
	}
	if len(rt.chain) == 0 {
		s.forward(rc, rt.targets, rt.modelSwap(model), rt.metrics, rt.mapModel(body, model), start, client)
		return
	}
	s.intercept(rc, rt, body, head, client, start, nil)
}

// routeFor returns the route serving model: the one naming it, else the default
// route; nil when there is none.
func (s *Server) routeFor(model string) *route {
	if rt := s.routes[model]; rt != nil {
		return rt
	}
	return s.defaultRoute
}

// admit authenticates a routed request (chat completions, Responses) and reads its
// JSON body and model; it answers the client itself and returns ok false when one
// of them is missing or wrong.
func (s *Server) admit(rc *fasthttp.RequestCtx, start time.Time) (client string, body []byte, head requestHead, ok bool) {
	client, aerr := s.authenticate(rc)
	if aerr != nil {
		s.fail(rc, s.passMetrics, start, aerr)
		return "", nil, head, false
	}
	if !s.checkRateLimit(rc, client, start) {
		return "", nil, head, false
	}
	body = rc.PostBody()
	// The bounded check comes before anything recursive reads the body (gjson's
	// own validity check overflowed the stack on 5.6 MB of "[").
	if err := rawjson.Check(body, s.cfg.Server.MaxJSONDepth); err != nil {
		s.fail(rc, s.passMetrics, start, invalidJSON(err))
		return "", nil, head, false
	}
	head = readHead(body)
	m := head.model
	if m.Type != gjson.String || m.Str == "" {
		s.fail(rc, s.passMetrics, start, &interceptors.Error{Status: 400, Type: "invalid_request_error", Code: "missing_model",
			Param: "model", Message: "request has no model (a string naming the model or route alias)"})
		return "", nil, head, false
	}
	s.debugBodyLog("request body", m.Str, body)
	return client, body, head, true
}

// mapModel returns body with the route's upstream_model as its model (body itself
// when the route keeps the client's model): the only edit a route without
// interceptors makes.
func (rt *route) mapModel(body []byte, model string) []byte {
	if rt.upstreamModel == "" || rt.upstreamModel == model {
		return body
	}
	if b, err := sjson.SetBytes(body, "model", rt.upstreamModel); err == nil {
		return b
	}
	return body
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
	if !s.checkRateLimit(rc, client, start) {
		return
	}
	defer s.settleTokens(rc)
	// The upstream gets the provider's key (auth mode keys): a client path must
	// not reach anything of its host outside the API's base path.
	if !reachesAll(s.passTargets, cleanPath(rc.Path())) {
		s.fail(rc, s.passMetrics, start, interceptors.Errorf(404, "invalid_request_error", "not_found",
			"no such endpoint: %s is outside the upstream's API (factgate forwards paths under /v1/)", cleanPath(rc.Path())))
		return
	}
	if s.serveModels(rc, client, start) {
		return
	}
	if rc.IsGet() && isStoredResponsePath(cleanPath(rc.Path())) {
		// A stored response shows the app's own instructions (injected.go).
		s.forwardEdited(rc, s.passTargets, nil, s.passMetrics, nil, start, client, s.withStoredInstructions)
		return
	}
	// Other paths carry no model the route could swap: each upstream gets the
	// request as the client sent it.
	s.forward(rc, s.passTargets, nil, s.passMetrics, rc.PostBody(), start, client)
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
//
// Every call but the console's static pages leaves an access log line: who
// (the client key, or the console session's), what and the status.
func (s *Server) handleAPI(rc *fasthttp.RequestCtx) {
	start := time.Now()
	if console.Public(rc.Path()) {
		if s.console == nil {
			s.consoleOff(rc)
			return
		}
		s.console.ServePublic(rc)
		if string(rc.Path()) == console.SessionPath {
			v, _ := console.ViewerFrom(rc)
			s.logAPI(rc, start, v.Name)
		}
		return
	}
	client, aerr := s.authenticateAPI(rc)
	if aerr != nil {
		s.fail(rc, s.passMetrics, start, aerr)
		return
	}
	rc.SetUserValue(clientKeyValue, client)
	defer s.logAPI(rc, start, client)
	p := string(rc.Path())
	if h, ok := s.api[p]; ok {
		h(rc)
		return
	}
	if h := s.apiPrefix.match(p); h != nil {
		h(rc)
		return
	}
	writeError(rc, interceptors.Errorf(404, "invalid_request_error", "not_found", "no factgate endpoint at %s", p))
}
