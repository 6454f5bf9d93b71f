package proxy

import (
	"context"
	"io"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/proxy/telemetry"
)

// isStreamed decides whether an upstream response is relayed while it arrives:
// event streams always, bodies of unknown or large size too.
func isStreamed(h *fasthttp.ResponseHeader) bool {
	if isEventStream(h.ContentType()) {
		return true
	}
	cl := h.ContentLength()
	return cl < 0 || cl > 1<<20
}

// forward relays one request to targets (a route's upstreams, in order, with
// their retries) and the answer back, streaming when the answer is a stream or
// large. models, when set, gives each upstream its model (a chat completion).
func (s *Server) forward(rc *fasthttp.RequestCtx, targets []target, models *modelSwap, rm *routeMetrics, body []byte, start time.Time, client string) {
	s.forwardEdited(rc, targets, models, rm, body, start, client, nil)
}

// forwardEdited is forward with an edit of the answer: when edit is not nil, an
// answer that is not an event stream is read whole (bounded by
// server.max_response_body), uncompressed, and edit returns the body the client
// gets (edit must return its input when it has nothing to change).
func (s *Server) forwardEdited(rc *fasthttp.RequestCtx, targets []target, models *modelSwap, rm *routeMetrics, body []byte, start time.Time, client string, edit func(status int, body []byte) []byte) {
	streamed, maxBody := isStreamed, 0
	if edit != nil {
		streamed = func(h *fasthttp.ResponseHeader) bool { return isEventStream(h.ContentType()) }
		maxBody = int(s.cfg.Server.MaxResponseBody)
	}
	tel := s.telemetryOf(rc)
	var ctx *requestCtx
	if tel != nil {
		ctx = newRequestCtxIn(tel.Context())
	} else {
		ctx = newRequestCtx()
	}
	wc, _ := rc.Conn().(*watchConn)
	if wc != nil {
		wc.arm(ctx)
	}
	// The caller checked that the cleaned path stays under every target's base.
	path := cleanPath(rc.Path())
	// A client with a token limit is counted on every stream: the upstream is
	// asked for the usage the client did not ask for, and it is stripped again.
	strip := false
	if edit == nil && s.countsTokens(rc) {
		body, strip = askUsage(rc.Path(), body)
	}
	sp := &sendPlan{
		targets: targets,
		header:  &rc.Request.Header,
		stream:  streamed,
		maxBody: maxBody,
		build: func(req *fasthttp.Request, t *target, key string) {
			req.Header.SetMethodBytes(rc.Method())
			req.Header.SetRequestURIBytes(t.up.targetURI(make([]byte, 0, 64), path, rc.URI().QueryString()))
			s.copyRequestHeaders(&req.Header, &rc.Request.Header, t.up, key, false, t.foreign)
			if edit != nil {
				// A compressed body could not be edited.
				req.Header.Del("Accept-Encoding")
			}
			req.SetBodyRaw(models.bodyFor(t, body))
		},
		kind: telemetry.KindRelay,
	}
	if tel != nil {
		sp.path, sp.body = string(rc.Path()), body
	}
	upStart := time.Now()
	res := s.send(ctx, sp)
	served := targets[min(res.served, len(targets)-1)].up
	if res.err != nil {
		err := res.err
		if wc != nil {
			wc.disarm()
		}
		if context.Cause(ctx) == errClientGone {
			err = context.Canceled
		}
		ctx.cancel(nil)
		e := upstreamError(served.name, err)
		tel.Fail(e.Code)
		rm.error(e.Code)
		total := time.Since(start)
		rm.observe(e.Status, total, time.Since(upStart))
		writeError(rc, e)
		setRetryAfter(&rc.Response.Header, err)
		rc.Response.Header.Set(HeaderUpstream, served.name)
		rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total-time.Since(upStart)))
		s.setRateLimitHeaders(rc)
		s.logAccess(rm.name, rc, e.Status, total, time.Since(upStart), client, e.Code)
		return
	}
	cl, resp := res.cl, res.resp
	upHeaders := time.Since(upStart)
	copyResponseHeaders(&rc.Response.Header, &resp.Header)
	rc.Response.Header.Set(HeaderUpstream, served.name)
	s.setRateLimitHeaders(rc)
	if cl == nil || !cl.stream {
		out := resp.Body()
		if edit != nil && len(resp.Header.ContentEncoding()) == 0 {
			out = edit(resp.StatusCode(), out)
		}
		rc.Response.SetBody(out)
		if s.countsTokens(rc) {
			s.spendTokens(rc, answerTokens(resp))
		}
		res.close(true)
		if wc != nil {
			wc.disarm()
		}
		ctx.cancel(nil)
		total := time.Since(start)
		rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total-upHeaders))
		rm.observe(rc.Response.StatusCode(), total, upHeaders)
		s.logAccess(rm.name, rc, rc.Response.StatusCode(), total, upHeaders, client, "")
		return
	}
	overhead := time.Since(start) - upHeaders
	rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(overhead))
	status := rc.Response.StatusCode()
	var usage *usageScanner
	window := rateWindowOf(rc)
	if s.countsTokens(rc) {
		usage = &usageScanner{spend: window.spend}
	}
	var events io.Reader = cl.body()
	if rm != s.passMetrics && isEventStream(resp.Header.ContentType()) {
		// A route's chat completion or Responses stream: every event's data on one
		// line.
		events = &eventFramer{r: events, max: int(s.cfg.Server.MaxResponseBody)}
	}
	// fasthttp reads the body from relayBody on the connection's goroutine and writes
	// each read as one flushed chunk, so events reach the client as they arrive.
	rb := &relayBody{cl: cl, r: events, usage: usage, call: res.call}
	if strip && isEventStream(resp.Header.ContentType()) {
		rb.client = newUsageStripper(readerFunc(rb.readUpstream))
	}
	rb.done = func(complete, clientGone bool) {
		if usage != nil && !usage.done {
			window.spend(0) // no usage seen: the reservation ends
		}
		// A client that hangs up right after the last byte can be seen by the
		// disconnect probe before fasthttp reports the body written: it got it all.
		if !complete && context.Cause(ctx) == errClientGone {
			clientGone = true
		}
		if clientGone {
			res.call.EndStream(complete, "cancelled")
		}
		res.close(complete)
		if wc != nil {
			wc.disarm()
		}
		ctx.cancel(nil)
		total := time.Since(start)
		// The client saw the upstream's status; the log and the metrics record how
		// the answer ended.
		st, code := status, ""
		switch {
		case clientGone:
			st, code = StatusClientClosed, "client_closed_request"
		case !complete:
			st, code = fasthttp.StatusBadGateway, "upstream_stream_broken"
			// Too late to retry (the client has part of the answer), but the
			// breaker hears of it.
			served.breaker.record(false, verdictFailure, time.Now())
		}
		if code != "" {
			rm.error(code)
		}
		rm.observe(st, total, total-overhead)
		s.logAccess(rm.name, rc, st, total, total-overhead, client, code)
		tel.End(st, code)
	}
	rc.Response.SetBodyStream(rb, -1)
}

// HeaderUpstream names, on every proxied answer, the upstream that served it (or
// whose failure the client gets).
const HeaderUpstream = "X-Factgate-Upstream"

// modelSwap gives each upstream of a route its model: a chat request asking for
// the route's model (what its first upstream gets) is sent to another upstream
// with that upstream's upstream_model, or the client's model when it has none. A
// request for any other model (a judge's own) is left alone. A nil modelSwap
// changes nothing (paths other than chat completions).
type modelSwap struct {
	route  string // the model the route's first upstream gets
	client string // the model the client asked for
}

// bodyFor returns body with the model t gets.
func (m *modelSwap) bodyFor(t *target, body []byte) []byte {
	if m == nil {
		return body
	}
	want := t.model
	if want == "" {
		want = m.client
	}
	if want == m.route || gjson.GetBytes(body, "model").Str != m.route {
		return body
	}
	if b, err := sjson.SetBytes(body, "model", want); err == nil {
		return b
	}
	return body
}

// relayBody is the client response body of a streamed pass-through: it reads the
// upstream body. When the upstream breaks off, its Read returns the error and
// fasthttp closes the client connection without the final chunk, so the client
// sees a truncated stream rather than a clean end.
type relayBody struct {
	cl    *call
	r     io.Reader
	usage *usageScanner   // reads the usage of the answer's events; nil: not counted
	call  *telemetry.Call // reads the answer for the call's span; nil: tracing off
	// client, when set, is what the client reads: the upstream's bytes
	// (readUpstream) with the usage the proxy asked for stripped.
	client io.Reader
	eof    bool
	broken bool // the upstream read failed
	closed bool
	done   func(complete, clientGone bool)
}

func (b *relayBody) Read(p []byte) (int, error) {
	if b.client != nil {
		return b.client.Read(p)
	}
	return b.readUpstream(p)
}

// readUpstream reads the upstream's body, scanning it for the usage.
func (b *relayBody) readUpstream(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.usage != nil {
		b.usage.scan(p[:n])
	}
	b.call.Stream(p[:n])
	if err == io.EOF {
		b.eof = true
	} else if err != nil {
		b.broken = true
	}
	return n, err
}

// readerFunc is a function as an io.Reader.
type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

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
