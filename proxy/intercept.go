package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge/rawjson"
	"github.com/factgate/factgate/proxy/telemetry"
)

// routeCaller is the Exchange's Upstream: it sends chat completions to the route's
// upstreams (with their retries and fallbacks, see send) with the client's
// end-to-end headers and credentials, and adds up the time spent waiting so the
// proxy's own overhead can be told apart.
type routeCaller struct {
	s *Server
	// up is the route's first upstream. A caller with no targets calls it alone
	// (with its own retries and circuit breaker).
	up *upstream
	// targets are the route's upstreams in order; nil means up alone.
	targets []target
	// models gives each target its model; nil leaves the body's model alone.
	models *modelSwap
	// served is the index of the target that served the request's first answer
	// (-1 before), shared by the callers of one request: the hidden calls go to
	// it first. failed is the index of the target whose failure a call returned.
	served, failed *atomic.Int32
	trace          *interceptors.Trace     // records every attempt; nil: none
	header         *fasthttp.RequestHeader // the client's headers, copied
	maxBody        int
	waitedNs       *atomic.Int64 // shared by every caller of one request
	// inflight is when the upstream call in flight started (Unix ns; 0: none),
	// shared like waitedNs, so the overhead can be told while a call runs.
	inflight *atomic.Int64
	// live, when set, makes the exchange's first upstream call stream and forward
	// its reasoning to the client (stream_reasoning); later calls never stream.
	live *liveEvents
	// firstHeaders receives the response headers of the first upstream call that
	// answered 2xx, once; nil for callers that do not report them.
	firstHeaders chan [][2]string
	// model, when set, replaces the upstream's model in the reasoning events
	// forwarded live (response_model: alias).
	model string
	// foreign: an upstream other than the route's own; it gets its own key, never
	// the client's credentials.
	foreign bool
	// held keeps the upstream answers whose bodies the exchange reads in place,
	// shared by every caller of one request; nil: the body is copied.
	held *heldAnswers
}

// requestCalls is what the callers of one request share (see routeCaller), in one
// allocation.
type requestCalls struct {
	waitedNs, inflight atomic.Int64
	served, failed     atomic.Int32
	held               heldAnswers
}

// heldAnswers are the upstream responses of one request whose bodies the
// exchange's Responses use in place (no copy of a 50 KB answer): they go back to
// fasthttp's pool when the request is finished, with the exchange's buffers.
//
// Lifetime: back to fasthttp's pool at finish (docs/architecture.md, Lifetimes).
type heldAnswers struct {
	mu    sync.Mutex
	resps []*fasthttp.Response
	// slots back resps for a request's first answers (the draft, a revision):
	// growing it from nil cost an allocation per request.
	slots [2]*fasthttp.Response
}

func (h *heldAnswers) keep(r *fasthttp.Response) {
	h.mu.Lock()
	if h.resps == nil {
		h.resps = h.slots[:0]
	}
	h.resps = append(h.resps, r)
	h.mu.Unlock()
}

// release returns the held responses; nothing may read their bodies after it.
func (h *heldAnswers) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range h.resps {
		fasthttp.ReleaseResponse(r)
		h.resps[i] = nil
	}
	h.resps = h.resps[:0]
	h.slots = [2]*fasthttp.Response{} // when resps outgrew them
}

// chatPath is where chat completions go; responsesPath where Responses API
// requests go (both mapped onto the upstream's base URL).
const (
	chatPath      = "/v1/chat/completions"
	responsesPath = "/v1/responses"
)

// plan is the sendPlan of one call POSTing body to path (chatPath, responsesPath).
// It is a value, and its request is made by buildPost rather than by a closure,
// so that a call allocates neither.
func (c *routeCaller) plan(path string, body []byte, stream func(*fasthttp.ResponseHeader) bool) sendPlan {
	targets := c.targets
	if targets == nil {
		targets = []target{{up: c.up, foreign: c.foreign, retry: c.up.retry}}
	}
	sp := sendPlan{targets: targets, header: c.header, stream: stream, maxBody: c.maxBody, trace: c.trace, caller: c, path: path, body: body}
	if c.served != nil {
		sp.first = max(int(c.served.Load()), 0)
	}
	return sp
}

// buildPost writes the request of an attempt of a call planned by plan: body
// POSTed to path on t, with the client's headers and key.
func (c *routeCaller) buildPost(req *fasthttp.Request, t *target, key, path string, body []byte) {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetRequestURIBytes(t.up.targetURI(make([]byte, 0, 64), []byte(path), nil))
	c.s.copyRequestHeaders(&req.Header, c.header, t.up, key, true, t.foreign || c.foreign)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(c.models.bodyFor(t, body))
}

// send makes one call and notes which upstream served it.
func (c *routeCaller) send(ctx context.Context, sp *sendPlan) sendResult {
	res := c.s.send(ctx, sp)
	if c.served == nil {
		return res
	}
	if res.err != nil || res.resp.StatusCode() >= 400 {
		c.failed.Store(int32(res.served))
	} else if c.served.CompareAndSwap(-1, int32(res.served)) && c.trace != nil {
		name := sp.targets[res.served].up.name
		c.trace.Do(func(t *interceptors.Trace) { t.Upstream = name })
	}
	return res
}

// upstreamName names the upstream whose answer or failure the client gets: the
// one that served the first answer, else the one that failed last, else the
// route's first.
func (c *routeCaller) upstreamName() string {
	targets := c.targets
	if targets == nil || c.served == nil {
		return c.up.name
	}
	if i := c.served.Load(); i >= 0 {
		return targets[i].up.name
	}
	if i := c.failed.Load(); i >= 0 {
		return targets[i].up.name
	}
	return c.up.name
}

// Complete implements interceptors.Upstream.
func (c *routeCaller) Complete(ctx context.Context, body []byte) (*interceptors.Response, error) {
	return c.completeAt(ctx, chatPath, body)
}

// completeAt POSTs body to path on the upstream (with retries and fallbacks) and
// returns the whole answer.
func (c *routeCaller) completeAt(ctx context.Context, path string, body []byte) (*interceptors.Response, error) {
	start := c.begin()
	sp := c.plan(path, body, nil)
	res := c.send(ctx, &sp)
	d := c.end(start)
	if res.err != nil {
		return nil, res.err
	}
	return c.whole(&res, d), nil
}

// whole is the answer of a call read whole (res: an answer, or a failed
// attempt's) that took d; the call is closed.
func (c *routeCaller) whole(res *sendResult, d time.Duration) *interceptors.Response {
	resp := res.resp
	out := &interceptors.Response{Status: resp.StatusCode(), Duration: d}
	if c.held != nil {
		// Lifetime: back to fasthttp's pool at finish (docs/architecture.md, Lifetimes).
		out.Body = resp.Body() // held until the request is finished
	} else {
		out.Body = append([]byte(nil), resp.Body()...)
	}
	out.Header = upstreamHeaders(&resp.Header)
	if c.held != nil {
		// The body was read whole: the connection goes back to its pool now, the
		// response when the request is finished.
		res.resp = nil
		c.held.keep(resp)
	}
	res.close(true)
	c.reportHeaders(out.Status, out.Header)
	return out
}

// upstreamHeaders copies the headers of an upstream answer the client may see (not
// the hop-by-hop ones, nor those its Connection header names): their names and
// values share one string, allocated once with the list, as a held answer's
// headers are read for every request.
func upstreamHeaders(h *fasthttp.ResponseHeader) [][2]string {
	extra := connectionTokens(h)
	keep := func(k []byte) bool { return !skipResponseHeader(k) && (extra == nil || !containsFold(extra, k)) }
	n, size := 0, 0
	for k, v := range h.All() {
		if keep(k) {
			n++
			size += len(k) + len(v)
		}
	}
	if n == 0 {
		return nil
	}
	// The builder never grows past size: a string it returned keeps its bytes
	// while more are written after them.
	var text strings.Builder
	text.Grow(size)
	out := make([][2]string, 0, n)
	for k, v := range h.All() {
		if keep(k) {
			at := text.Len()
			text.Write(k)
			text.Write(v)
			all := text.String()
			out = append(out, [2]string{all[at : at+len(k)], all[at+len(k):]})
		}
	}
	return out
}

func (c *routeCaller) waited() time.Duration { return time.Duration(c.waitedNs.Load()) }

// begin marks an upstream call in flight.
func (c *routeCaller) begin() time.Time {
	now := time.Now()
	if c.inflight != nil {
		c.inflight.Store(now.UnixNano())
	}
	return now
}

// end marks the call that began at start done and counts its time as waited.
func (c *routeCaller) end(start time.Time) time.Duration {
	d := time.Since(start)
	c.waitedNs.Add(int64(d))
	if c.inflight != nil {
		c.inflight.Store(0)
	}
	return d
}

// overhead is the time since start spent in the proxy, upstream calls excluded,
// including the one in flight.
func (c *routeCaller) overhead(start time.Time) time.Duration {
	now := time.Now()
	d := now.Sub(start) - c.waited()
	if c.inflight != nil {
		if since := c.inflight.Load(); since != 0 {
			d -= now.Sub(time.Unix(0, since))
		}
	}
	return max(d, 0)
}

// reportHeaders hands the headers of the first 2xx upstream answer to
// firstHeaders (a held stream whose headers are not sent yet takes them along).
func (c *routeCaller) reportHeaders(status int, h [][2]string) {
	if c.firstHeaders == nil || status < 200 || status > 299 {
		return
	}
	select {
	case c.firstHeaders <- h:
	default:
	}
	c.firstHeaders = nil
}

// outcome is what running a route's chain produced.
type outcome struct {
	ex  *interceptors.Exchange
	err *interceptors.Error
}

// interception is one intercepted request: what its callers share, the route's
// caller, the copy of the client's headers and the exchange live in it, so that
// they cost one allocation, and finishing the request is its methods rather than
// closures built for every request.
type interception struct {
	s      *Server
	rc     *fasthttp.RequestCtx
	rt     *route
	model  string // the model the client asked for
	client string
	start  time.Time
	ctx    requestCtx
	wc     *watchConn // nil when the connection is not watched
	// traceSaved: the trace is stored (saveTrace runs once).
	traceSaved bool
	// tel is the request's OpenTelemetry server span; nil when tracing is off.
	tel    *telemetry.Request
	calls  requestCalls
	caller routeCaller
	header fasthttp.RequestHeader // the client's headers, copied
	ex     interceptors.Exchange
}

// upstreamNamed is the exchange's UpstreamNamed: a caller for another configured
// upstream, sharing the request's counters, trace and held answers.
func (st *interception) upstreamNamed(name string) (interceptors.Upstream, bool) {
	up := st.s.upstreams[name]
	if up == nil {
		return nil, false
	}
	caller := &st.caller
	return &routeCaller{s: st.s, up: up, maxBody: caller.maxBody, header: caller.header, waitedNs: caller.waitedNs, inflight: caller.inflight,
		trace: caller.trace, foreign: up != st.rt.up, held: caller.held}, true
}

// run runs the route's chain (see runChain).
func (st *interception) run(early chan<- [][2]string, hand *liveHandoff) outcome {
	o := st.s.runChain(&st.ctx, st.rt, &st.ex, early, hand)
	if st.rt.responseAlias {
		answerAsAlias(o, st.model)
	}
	return o
}

// saveTrace stores the trace before the answer's last bytes go out, so that it
// can be fetched the moment the answer is complete; it runs once.
func (st *interception) saveTrace() {
	if !st.traceSaved {
		st.traceSaved = true
		st.s.saveTrace(&st.ex)
	}
}

// finish records the request. delivered says the whole answer was written: a
// client that hangs up right after reading [DONE] can be seen by the disconnect
// probe before fasthttp reports the body written, and got its answer.
func (st *interception) finish(status int, errCode string, delivered bool) {
	s, rt, rc, ex, caller := st.s, st.rt, st.rc, &st.ex, &st.caller
	if st.wc != nil {
		st.wc.disarm()
	}
	cause := context.Cause(&st.ctx)
	st.ctx.cancel(nil)
	total := time.Since(st.start)
	if cause == errClientGone && !delivered {
		status, errCode = StatusClientClosed, "client_closed_request"
	}
	if errCode != "" {
		rt.metrics.error(errCode)
	}
	rt.metrics.observe(status, total, caller.waited())
	s.spendTokens(rc, ex.Usage.TotalTokens)
	s.logAccess(rt.name, rc, status, total, caller.waited(), st.client, errCode)
	s.recordRequest(ex, status, errCode, total)
	st.saveTrace()
	if st.tel != nil {
		st.tel.Finish(ex, rt.pack, caller.upstreamName())
		st.tel.End(status, errCode)
	}
	// The chain is done and the answer written: the exchange's buffers and the
	// upstream answers it read in place go back to their pools.
	ex.Release()
	caller.held.release()
}

// intercept serves a chat completion on a route with interceptors: request
// phases, one buffered upstream call, response phases in reverse order, then the
// answer as JSON or as a synthesized stream. rx is set for a Responses API request,
// whose chat completion translation body is: the answer is then rendered as a
// Responses object or event stream. head is body's head (readHead), its model the
// one the client asked for.
func (s *Server) intercept(rc *fasthttp.RequestCtx, rt *route, body []byte, head requestHead, client string, start time.Time, rx *responsesExchange) {
	model, stream, includeUsage := head.model.Str, head.stream, head.includeUsage
	st := &interception{s: s, rc: rc, rt: rt, model: model, client: client, start: start}
	if st.tel = s.telemetryOf(rc); st.tel != nil {
		st.ctx.initIn(st.tel.Context())
	} else {
		st.ctx.init()
	}
	wc, _ := rc.Conn().(*watchConn)
	st.wc = wc
	if wc != nil {
		wc.arm(&st.ctx)
	}
	shared, caller := &st.calls, &st.caller
	*caller = routeCaller{s: s, up: rt.up, targets: rt.targets, maxBody: int(s.cfg.Server.MaxResponseBody), header: &st.header,
		waitedNs: &shared.waitedNs, inflight: &shared.inflight, served: &shared.served, failed: &shared.failed, held: &shared.held}
	caller.served.Store(-1)
	caller.failed.Store(-1)
	caller.models = rt.modelSwap(model)
	if rt.responseAlias {
		caller.model = model
	}
	rc.Request.Header.CopyTo(caller.header)
	trace := s.newTrace(rc, rt.name, client)
	st.tel.Adopt(trace)
	caller.trace = trace
	ex := &st.ex
	*ex = interceptors.Exchange{
		Route:         rt.name,
		Model:         model,
		Header:        caller.header,
		ClientKey:     client,
		Stream:        stream,
		Upstream:      caller,
		UpstreamNamed: st.upstreamNamed,
		Trace:         trace,
	}
	ex.Trace.ClientKey = client
	// The exchange owns a copy of the client's body, in a buffer it returns to
	// the pool when the request is finished (finish): fasthttp reuses its own. A
	// stage whose goroutine reads it after the request (the facts stage builds the
	// fact index in the background) holds the exchange (Exchange.Hold). The
	// outgoing body starts as the same bytes; request phases replace it, never
	// edit it in place.
	original := body
	if rx == nil {
		// Lifetime: until finish, or the last Hold's Release (docs/architecture.md, Lifetimes).
		original = append(ex.Buffer(len(body)), body...)
	} // a Responses request's chat translation is the exchange's already
	out := original
	if rt.upstreamModel != "" && rt.upstreamModel != model {
		out, _ = sjson.SetBytes(out, "model", rt.upstreamModel)
	}
	ex.Original, ex.Body = original, out
	// The context stage reads the scan of the client's body admit made, when no
	// stage before it replaces the body: original is a copy of the bytes scanned.
	reqcontext.KeepScan(ex, original, head.scan)
	if rx != nil {
		// The client's Responses request is read until the answer is rendered:
		// a copy the exchange owns, in a buffer the proxy reuses.
		// Lifetime: until finish, or the last Hold's Release (docs/architecture.md, Lifetimes).
		rx.request = append(ex.Buffer(len(rx.request)), rx.request...)
		if rt.up.responsesAPI {
			ex.Upstream = &responsesCaller{inner: caller, rx: rx, ex: ex}
			ex.Trace.Note("responses: a Responses API request; the chain sees it as a chat completion, upstream " + rt.up.name + " gets it as a Responses request (api: responses)")
		} else {
			ex.Trace.Note("responses: a Responses API request, translated to a chat completion for upstream " + rt.up.name + " (api: chat) and its answer back")
		}
	}
	s.keepRequest(ex)

	// Live reasoning forwards chat chunks; a Responses stream gets the reasoning
	// summary with the answer.
	if stream && rt.streamReason && rx == nil {
		caller.live = newLiveEvents()
	}
	if !stream {
		o := st.run(nil, nil)
		status, code := s.writeOutcome(rc, o, caller, start, false, includeUsage, rx)
		st.finish(status, code, false)
		return
	}

	// A streaming client: answer directly if the chain is quick, else commit an
	// event stream and keep it alive until the answer is ready. The stream's
	// headers carry what is known when they go out: the draft's upstream headers
	// when it has answered, the overhead so far; the rest follows as comments at
	// the end of the stream. An answer no stage holds is relayed live instead
	// (relay.go): not on a Responses request to an api: chat upstream, whose
	// answer is translated whole, as on a route without interceptors.
	done := make(chan outcome, 1)
	early := make(chan [][2]string, 1)
	caller.firstHeaders = make(chan [][2]string, 1)
	upHeaders := caller.firstHeaders
	var hand *liveHandoff
	var decided <-chan struct{}
	var relays <-chan *liveRelay
	if rx == nil || rt.up.responsesAPI {
		hand = newLiveHandoff()
		decided, relays = hand.decided, hand.relays
	}
	go func() { done <- st.run(early, hand) }()
	interval := time.Duration(s.cfg.Server.KeepaliveInterval)
	var sent [][2]string // the upstream headers the stream's headers carry
	timer := time.NewTimer(interval)
	commit := timer.C
	if s.heldCommit != nil {
		commit = s.heldCommit()
	}
wait:
	for {
		select {
		case o := <-done:
			timer.Stop()
			status, code := s.writeOutcome(rc, o, caller, start, true, includeUsage, rx)
			st.finish(status, code, false)
			return
		case <-decided:
			// Relayed live: nothing goes out before the upstream's headers.
			timer.Stop()
			commit, decided = nil, nil
		case lr := <-relays:
			var hdrs [][2]string
			select {
			case hdrs = <-early: // announced before the upstream call
			default:
			}
			st.serveRelay(lr, hdrs, done)
			return
		case h := <-upHeaders:
			sent, upHeaders = h, nil
			// With live reasoning the stream is committed as the upstream starts
			// answering, so the reasoning can flow.
			if caller.live != nil {
				timer.Stop()
				break wait
			}
		case <-commit:
			break wait
		}
	}
	timer.Stop()
	if upHeaders != nil {
		select {
		case sent = <-upHeaders:
		default:
		}
	}
	// Headers the request phases set (X-Factgate-Variant) go out with the
	// stream's headers; those of the response phases are in the trace.
	var hdrs [][2]string
	select {
	case hdrs = <-early:
	case o := <-done:
		status, code := s.writeOutcome(rc, o, caller, start, true, includeUsage, rx)
		st.finish(status, code, false)
		return
	}
	select {
	case <-decided:
		// The request phases ended in a live relay (decided before early): no
		// held stream, as on a route without interceptors.
		select {
		case lr := <-relays:
			st.serveRelay(lr, hdrs, done)
		case o := <-done:
			status, code := s.writeOutcome(rc, o, caller, start, true, includeUsage, rx)
			st.finish(status, code, false)
		}
		return
	default:
	}
	for _, h := range hdrs {
		rc.Response.Header.Set(h[0], h[1])
	}
	for _, h := range sent {
		if !strings.EqualFold(h[0], "Content-Type") {
			rc.Response.Header.Add(h[0], h[1])
		}
	}
	rc.SetStatusCode(200)
	rc.SetContentType("text/event-stream")
	rc.Response.Header.Set("Cache-Control", "no-cache")
	rc.Response.Header.Set("X-Accel-Buffering", "no")
	rc.Response.Header.Set("X-Factgate-Trace-Id", ex.Trace.ID)
	rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(caller.overhead(start)))
	if sent != nil {
		rc.Response.Header.Set(HeaderUpstream, caller.upstreamName())
	}
	s.setRateLimitHeaders(rc)
	hs := &heldStream{
		done:    done,
		ticker:  time.NewTicker(interval),
		pending: []byte(keepAlive),
		live:    caller.live,
		render: func(o outcome) ([]byte, int, string) {
			st.saveTrace()
			late := []string{"X-Factgate-Overhead: " + formatOverhead(caller.overhead(start))}
			if sent == nil {
				late = append(late, HeaderUpstream+": "+caller.upstreamName())
			}
			if sent == nil && o.ex.Response.OK() {
				limited := rateWindowOf(rc) != nil
				for _, h := range o.ex.Response.Header {
					// A limited client's x-ratelimit-* are its own, in the headers.
					if !strings.EqualFold(h[0], "Content-Type") && !(limited && isRateLimitHeader(h[0])) {
						late = append(late, h[0]+": "+h[1])
					}
				}
			}
			return s.renderHeldOutcome(rt, o, includeUsage, caller.live != nil, rx, late...)
		},
	}
	hs.finish = func(clientGone bool) {
		hs.ticker.Stop()
		if clientGone {
			st.ctx.cancel(errClientGone)
			if !hs.finished {
				<-done
			}
			st.finish(StatusClientClosed, "client_closed_request", false)
			return
		}
		st.finish(hs.status, hs.code, true)
	}
	rc.Response.SetBodyStream(hs, -1)
}

// serveRelay answers a streaming request with a live relay of the upstream's
// stream (relay.go): the upstream's status and headers with factgate's, then its
// events as they come.
func (st *interception) serveRelay(lr *liveRelay, hdrs [][2]string, done <-chan outcome) {
	s, rc, caller := st.s, st.rc, &st.caller
	if !lr.take() {
		// The client went away while the upstream began: nobody reads it.
		<-done
		st.finish(StatusClientClosed, "client_closed_request", false)
		return
	}
	for _, h := range lr.header {
		rc.Response.Header.Add(h[0], h[1])
	}
	// The request phases' headers (X-Factgate-Variant).
	for _, h := range hdrs {
		rc.Response.Header.Set(h[0], h[1])
	}
	rc.SetStatusCode(lr.status)
	var value [64]byte
	rc.Response.Header.SetCanonical(headerTraceID, append(value[:0], st.ex.Trace.ID...))
	rc.Response.Header.SetCanonical(headerOverhead, appendOverhead(value[:0], caller.overhead(st.start)))
	rc.Response.Header.SetCanonical(headerUpstream, append(value[:0], caller.upstreamName()...))
	s.setRateLimitHeaders(rc)
	lr.attach(done, st.saveTrace, st.finishRelay)
	rc.Response.SetBodyStream(lr, -1)
}

// finishRelay records a request whose answer was relayed live (see finish): a
// client that went away cancels what is left of the request first.
func (st *interception) finishRelay(status int, errCode string, delivered bool) {
	if status == StatusClientClosed {
		st.ctx.cancel(errClientGone)
	}
	st.finish(status, errCode, delivered)
}

// answerAsAlias makes a finished chain's answer carry the model the client asked
// for (response_model: alias).
func answerAsAlias(o outcome, model string) {
	if o.err != nil || !o.ex.Response.OK() || !gjson.GetBytes(o.ex.Response.Body, "model").Exists() {
		return
	}
	if b, err := sjson.SetBytes(o.ex.Response.Body, "model", model); err == nil {
		o.ex.Response.Body = b
	}
}

// heldStream is the body of a streaming response whose answer is held while the
// chain works: a keep-alive (a blank line) every interval, then the final answer
// as chunk events (or an error event). fasthttp writes each Read as a flushed
// chunk. (It is committed only once the request phases are done and the answer
// is held: an answer relayed live is served by serveRelay.)
type heldStream struct {
	done     <-chan outcome
	ticker   *time.Ticker
	live     *liveEvents // reasoning forwarded live; nil without stream_reasoning
	pending  []byte
	render   func(outcome) ([]byte, int, string)
	finish   func(clientGone bool)
	finished bool
	closed   bool
	status   int
	code     string
}

func (h *heldStream) Read(p []byte) (int, error) {
	for len(h.pending) == 0 {
		if h.finished {
			return 0, io.EOF
		}
		var liveReady <-chan struct{}
		if h.live != nil {
			liveReady = h.live.ready
		}
		select {
		case o := <-h.done:
			var rendered []byte
			rendered, h.status, h.code = h.render(o)
			if h.live != nil {
				// Reasoning still queued goes out before the answer.
				h.pending = h.live.drain(h.pending[:0])
			}
			h.pending = append(h.pending, rendered...)
			h.finished = true
		case <-liveReady:
			h.pending = h.live.drain(h.pending[:0])
		case <-h.ticker.C:
			h.pending = append(h.pending[:0], keepAlive...)
		}
	}
	n := copy(p, h.pending)
	h.pending = h.pending[n:]
	return n, nil
}

// CloseWithError is called by fasthttp when the body is written or the client
// went away (werr).
func (h *heldStream) CloseWithError(werr error) error {
	if h.closed {
		return nil
	}
	h.closed = true
	h.finish(werr != nil || !h.finished)
	return nil
}

// renderHeldOutcome renders a finished chain as the rest of an event stream whose
// headers are already sent: the answer's chunks, or an error event.
// With liveReasoning the reasoning already went out and is not repeated. late are
// more "Name: value" lines the headers could not carry, told as comments at the
// end of an answer with the revision headers. rx renders a Responses API request's
// answer as its event stream.
func (s *Server) renderHeldOutcome(rt *route, o outcome, includeUsage, liveReasoning bool, rx *responsesExchange, late ...string) ([]byte, int, string) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	status, code := 200, ""
	switch {
	case o.err != nil && rx != nil:
		status, code = o.err.Status, o.err.Code
		_ = writeResponsesStreamError(w, o.err.Envelope())
	case o.err != nil:
		status, code = o.err.Status, o.err.Code
		_ = writeStreamError(w, o.err.Envelope())
	case o.ex.Response == nil || !o.ex.Response.OK():
		e := upstreamFailure(servedBy(rt, o.ex), o.ex)
		status, code = e.Status, e.Code
		env := e.Envelope()
		if o.ex.Response != nil && gjson.GetBytes(o.ex.Response.Body, "error").Exists() {
			env = withoutInjected(o.ex.Response.Body, o.ex.Injected)
		}
		if rx != nil {
			_ = writeResponsesStreamError(w, env)
		} else {
			_ = writeStreamError(w, env)
		}
	default:
		body := s.finalBody(o.ex)
		if liveReasoning {
			body = withoutReasoning(body)
		}
		// The stream's headers went out before these were known.
		var comments []string
		for _, h := range o.ex.ResponseHeaders {
			if h[0] == "X-Factgate-Revisions" || h[0] == "X-Factgate-Issues" || h[0] == "X-Factgate-Notice" {
				comments = append(comments, h[0]+": "+h[1])
			}
		}
		comments = append(comments, late...)
		if rx != nil {
			_ = writeResponsesStream(w, rx.answer(o.ex, body), s.cfg.Server.StreamChunkRunes, comments...)
		} else {
			_ = writeCompletionStream(w, body, includeUsage, s.cfg.Server.StreamChunkRunes, comments...)
		}
	}
	_ = w.Flush()
	return buf.Bytes(), status, code
}

// errMalformedAnswer is the upstream failure of a 2xx answer that is not JSON.
var errMalformedAnswer = errors.New("the upstream answered 200 with a body that is not JSON")

// errEmptyAnswer is the upstream failure of a 2xx answer without a choice that
// carries a message ({}, "choices": []).
var errEmptyAnswer = errors.New("the upstream answered 200 with no choice carrying a message")

// answerTooDeepError is the upstream failure of a 2xx answer nested deeper than
// server.max_json_depth; it is an errMalformedAnswer.
type answerTooDeepError struct{ limit int }

func (e *answerTooDeepError) Error() string {
	return fmt.Sprintf("the upstream answered 200 with JSON nested deeper than %d levels (server.max_json_depth)", e.limit)
}

func (e *answerTooDeepError) Is(target error) bool { return target == errMalformedAnswer }

// checkAnswer checks a held 2xx answer before anything reads it, in one linear
// pass: an answer that is not JSON, or nests deeper than server.max_json_depth,
// is the upstream's failure, not an answer to check or to relay.
func (s *Server) checkAnswer(body []byte) error {
	err := rawjson.Check(body, s.cfg.Server.MaxJSONDepth)
	var se *rawjson.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.MaxDepth > 0:
		return &answerTooDeepError{limit: se.MaxDepth}
	}
	return errMalformedAnswer
}

// runChain runs request phases, the upstream call and response phases. When
// early is not nil it receives a copy of the response headers the request phases
// set, once they are done (or failed). With hand, a streaming request's answer
// that no stage holds (holdsAnswer) is relayed live through it.
func (s *Server) runChain(ctx context.Context, rt *route, ex *interceptors.Exchange, early chan<- [][2]string, hand *liveHandoff) (o outcome) {
	o.ex = ex
	announced := early == nil
	announce := func() {
		if !announced {
			announced = true
			early <- append([][2]string(nil), ex.ResponseHeaders...)
		}
	}
	defer announce()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in interceptor chain", "route", rt.name, "panic", slog.AnyValue(p))
			o.err = interceptors.Errorf(500, "server_error", "internal_error", "internal error in factgate")
		}
	}()
	ran := 0
	for i, ic := range rt.chain {
		ran = i + 1
		rp, ok := ic.(interceptors.RequestPhase)
		if !ok {
			continue
		}
		if err := rp.OnRequest(ctx, ex); err != nil {
			o.err = asClientError(ic.Name(), err)
			notifyFailure(ctx, rt.chain[:i], ex, o.err)
			return o
		}
		if ex.Response != nil {
			break
		}
	}
	// Decided before the headers are announced: the connection's side, which
	// waits for them to commit a held stream, then sees the decision too.
	ls, relay := ex.Upstream.(liveStreamer)
	relay = relay && hand != nil && ex.Response == nil && ex.Stream && !holdsAnswer(rt.chain[:ran], ex) && ls.canStreamLive(ex)
	if relay {
		close(hand.decided)
	}
	announce()
	if relay {
		s.relayLive(ctx, ex, ls, hand)
	} else if ex.Response == nil {
		body := ex.Body
		if ex.Stream {
			body, _ = sjson.SetBytes(body, "stream", false)
			body, _ = sjson.DeleteBytes(body, "stream_options")
		}
		var resp *interceptors.Response
		var err error
		if c, ok := ex.Upstream.(*routeCaller); ok && c.live != nil {
			resp, err = c.completeForwardingReasoning(ctx, body, c.live)
		} else {
			resp, err = ex.Upstream.Complete(ctx, body)
		}
		s.holdAnswer(ex, resp, err)
	}
	if o.err = responsePhases(ctx, rt.chain[:ran], ex); o.err != nil {
		return o
	}
	if ctx.Err() != nil && ex.Response == nil {
		o.err = upstreamError(servedBy(rt, ex), context.Canceled)
	}
	return o
}

// holdAnswer makes the upstream's answer (or failure) the exchange's. A held
// answer must be read: a 2xx body that is not JSON, or that has no choice with a
// message, is the upstream's failure, not an answer to check, revise or relay.
func (s *Server) holdAnswer(ex *interceptors.Exchange, resp *interceptors.Response, err error) {
	if err == nil && resp.OK() {
		// The check reads the answer as it goes (Response.CheckJSON), so that
		// reading it costs no second pass; checkAnswer, whose verdict it is, says
		// why an answer fails it.
		if !resp.CheckJSON(s.cfg.Server.MaxJSONDepth) {
			if cerr := s.checkAnswer(resp.Body); cerr != nil {
				resp, err = nil, cerr
			} else {
				resp.MarkValid() // not reached while the two agree
			}
		}
		if resp != nil && !resp.HasMessage() {
			resp, err = nil, errEmptyAnswer
		}
	}
	ex.Response, ex.UpstreamErr = resp, err
	if resp.OK() {
		ex.Usage = ex.Usage.Add(resp.Usage())
	}
}

// responsePhases runs the response phases of chain (the interceptors whose
// request phase ran), innermost first. The first that fails ends them: the
// interceptors outside it are told (notifyFailure) and its error is returned.
func responsePhases(ctx context.Context, chain []interceptors.Interceptor, ex *interceptors.Exchange) *interceptors.Error {
	for i := len(chain) - 1; i >= 0; i-- {
		rp, ok := chain[i].(interceptors.ResponsePhase)
		if !ok {
			continue
		}
		if err := rp.OnResponse(ctx, ex); err != nil {
			e := asClientError(chain[i].Name(), err)
			notifyFailure(ctx, chain[:i], ex, e)
			return e
		}
	}
	return nil
}

// servedBy names the upstream whose answer or failure an exchange of route rt got.
func servedBy(rt *route, ex *interceptors.Exchange) string {
	if c, ok := ex.Upstream.(*routeCaller); ok {
		return c.upstreamName()
	}
	return rt.up.name
}

// notifyFailure tells the outer interceptors (outer is the chain before the one
// that failed) that implement FailurePhase, innermost first.
func notifyFailure(ctx context.Context, outer []interceptors.Interceptor, ex *interceptors.Exchange, err *interceptors.Error) {
	for i := len(outer) - 1; i >= 0; i-- {
		if fp, ok := outer[i].(interceptors.FailurePhase); ok {
			fp.OnFailure(ctx, ex, err)
		}
	}
}

func asClientError(name string, err error) *interceptors.Error {
	if e := interceptors.AsError(err); e != nil {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return upstreamError("", err)
	}
	return &interceptors.Error{Status: 500, Type: "server_error", Code: "interceptor_failed",
		Message: name + " failed: " + err.Error(), Err: err}
}

// upstreamFailure is the error for an exchange whose upstream call failed.
func upstreamFailure(name string, ex *interceptors.Exchange) *interceptors.Error {
	if ex.Response != nil {
		return &interceptors.Error{Status: ex.Response.Status, Type: "upstream_error", Code: "upstream_status_" + strconv.Itoa(ex.Response.Status),
			Message: "upstream answered with status " + strconv.Itoa(ex.Response.Status)}
	}
	err := ex.UpstreamErr
	if err == nil {
		err = errors.New("no response")
	}
	return upstreamError(name, err)
}

// finalBody is the answer's body with usage summed over every upstream call.
//
// Only the three counts change, and only when other calls were made: an answer
// from one call keeps its usage as the upstream wrote it, and the upstream's other
// usage fields (prompt_tokens_details, …) stay.
func (s *Server) finalBody(ex *interceptors.Exchange) []byte {
	body := ex.Response.Body
	if ex.Usage == (interceptors.Usage{}) || ex.Usage == ex.Response.Usage() {
		return body
	}
	if !gjson.GetBytes(body, "usage").IsObject() {
		if b, err := sjson.SetRawBytes(body, "usage", ex.Usage.JSON()); err == nil {
			body = b
		}
		return body
	}
	for _, f := range [...]struct {
		path string
		n    int
	}{{"usage.prompt_tokens", ex.Usage.PromptTokens}, {"usage.completion_tokens", ex.Usage.CompletionTokens}, {"usage.total_tokens", ex.Usage.TotalTokens}} {
		if b, err := sjson.SetBytes(body, f.path, f.n); err == nil {
			body = b
		}
	}
	return body
}

// appendOverhead appends formatOverhead(d) to dst.
func appendOverhead(dst []byte, d time.Duration) []byte {
	return append(strconv.AppendFloat(dst, ms(max(d, 0)), 'f', 3, 64), "ms"...)
}

// writeOutcome writes a finished chain's answer (not yet committed to the wire); rx
// renders a Responses API request's answer.
func (s *Server) writeOutcome(rc *fasthttp.RequestCtx, o outcome, caller *routeCaller, start time.Time, stream, includeUsage bool, rx *responsesExchange) (int, string) {
	ex := o.ex
	setFactgateHeaders := func() {
		for _, h := range ex.ResponseHeaders {
			rc.Response.Header.Set(h[0], h[1])
		}
		var value [64]byte
		rc.Response.Header.SetCanonical(headerTraceID, append(value[:0], ex.Trace.ID...))
		rc.Response.Header.SetCanonical(headerOverhead, appendOverhead(value[:0], caller.overhead(start)))
		rc.Response.Header.SetCanonical(headerUpstream, append(value[:0], caller.upstreamName()...))
		s.setRateLimitHeaders(rc)
	}
	switch {
	case o.err != nil:
		writeError(rc, o.err)
		setFactgateHeaders()
		return o.err.Status, o.err.Code
	case ex.Response == nil:
		e := upstreamFailure(caller.upstreamName(), ex)
		writeError(rc, e)
		setRetryAfter(&rc.Response.Header, ex.UpstreamErr)
		setFactgateHeaders()
		return e.Status, e.Code
	case !ex.Response.OK():
		// Upstream errors pass through unchanged, but for a quote of what
		// factgate injected.
		rc.SetStatusCode(ex.Response.Status)
		for _, h := range ex.Response.Header {
			rc.Response.Header.Add(h[0], h[1])
		}
		rc.SetBody(withoutInjected(ex.Response.Body, ex.Injected))
		setFactgateHeaders()
		return ex.Response.Status, "upstream_status_" + strconv.Itoa(ex.Response.Status)
	}
	body := s.finalBody(ex)
	if rx != nil {
		body = rx.answer(ex, body)
	}
	s.debugBodyLog("response body", ex.Route, body)
	for _, h := range ex.Response.Header {
		if stream && strings.EqualFold(h[0], "Content-Type") {
			continue
		}
		rc.Response.Header.Add(h[0], h[1])
	}
	setFactgateHeaders()
	if !stream {
		rc.SetStatusCode(200)
		rc.SetBody(body)
		return 200, ""
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if rx != nil {
		_ = writeResponsesStream(w, body, s.cfg.Server.StreamChunkRunes)
	} else {
		_ = writeCompletionStream(w, body, includeUsage, s.cfg.Server.StreamChunkRunes)
	}
	rc.SetStatusCode(200)
	rc.SetContentType("text/event-stream")
	rc.Response.Header.Set("Cache-Control", "no-cache")
	rc.SetBody(buf.Bytes())
	return 200, ""
}

// How long storing a trace may take: the answer waits up to traceSaveWait for it,
// so the trace can be fetched as soon as the answer is complete; a slower store
// (a Redis that hangs) does not hold the answer longer and finishes in the
// background within traceSaveTimeout. The save is not cut at traceSaveWait, as a
// cancelled Redis write would count as a Redis failure.
const (
	traceSaveWait    = 250 * time.Millisecond
	traceSaveTimeout = 2 * time.Second
)

// saveTrace stores an intercepted request's trace; call it before the answer's
// last bytes are written. A store in memory alone saves it in the request's
// goroutine; one with Redis behind it in a goroutine of its own, waited for up
// to traceSaveWait.
func (s *Server) saveTrace(ex *interceptors.Exchange) {
	if s.traces == nil || ex.Trace == nil {
		return
	}
	ex.Trace.Do(func(t *interceptors.Trace) { t.Usage = ex.Usage })
	if m, ok := s.traces.(memoryTraceStore); ok && m.SavesInMemory() {
		if err := s.traces.SaveTrace(context.Background(), ex.Trace); err != nil {
			s.log.Warn("saving trace failed", "trace_id", ex.Trace.ID, "error", err)
		}
		return
	}
	saved := make(chan struct{})
	s.background.Add(1) // Shutdown waits for a save that outlives the answer
	go func() {
		defer s.background.Done()
		defer close(saved)
		ctx, cancel := context.WithTimeout(context.Background(), traceSaveTimeout)
		defer cancel()
		if err := s.traces.SaveTrace(ctx, ex.Trace); err != nil {
			s.log.Warn("saving trace failed", "trace_id", ex.Trace.ID, "error", err)
		}
	}()
	wait := time.NewTimer(traceSaveWait)
	defer wait.Stop()
	select {
	case <-saved:
	case <-wait.C:
		s.log.Warn("the trace store is slow; the answer goes out before its trace is stored", "trace_id", ex.Trace.ID, "waited", traceSaveWait)
	}
}
