package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/proxy/telemetry"
)

// One upstream call, with its retries and fallbacks (issue 15). Every call the
// proxy makes to a provider goes through send: pass-through requests, the draft of
// a held route, and the hidden calls (revision, repair, judge) through routeCaller.
//
// What is retried is only what the provider did no billable work for: a
// connection that could not be made (no byte of the request was written), and a
// 429, 502, 503 or 504 answer — decided on the answer's status line, before the
// proxy sends the client anything. A request the upstream may have read (a
// failure after its bytes were written, a timeout waiting for the answer) is never
// sent again, to this upstream or another: the provider may have billed it. A
// stream that already reached the client is never retried either: send returns
// before the caller relays a byte.

// target is one upstream of a route's ordered list.
type target struct {
	up *upstream
	// model is the model this upstream gets in place of the route's ("" keeps the
	// client's).
	model string
	// foreign: not the route's first upstream. It gets its own key, never the
	// client's credentials, which belong to the first.
	foreign bool
	retry   retryPolicy
}

// sendPlan is one upstream call to make.
type sendPlan struct {
	targets []target
	// first is the index of the target tried first (hidden calls: the one that
	// served the draft); the others follow in order, wrapping around.
	first int
	// build writes an attempt's request to t; key is the provider key to send
	// ("" when the client's credentials go, or none). Nil for a call a route's
	// caller planned: caller.buildPost POSTs body to path.
	build  func(req *fasthttp.Request, t *target, key string)
	caller *routeCaller
	path   string
	body   []byte
	// header are the client's headers: whether it sent its own Authorization
	// decides whether the upstream's key pool is used.
	header *fasthttp.RequestHeader
	// stream and maxBody are up.do's.
	stream  func(*fasthttp.ResponseHeader) bool
	maxBody int
	// trace, when set, records every attempt.
	trace *interceptors.Trace
	// kind is the call's factgate.call.kind ("": the one the context names, else
	// draft); call is its span, with tracing on (send starts it).
	kind string
	call *telemetry.Call
}

// sendResult is how a call ended: a live answer (cl and resp, as up.do returns
// them), an answer read whole from a failed attempt (resp alone), or an error.
type sendResult struct {
	cl   *call
	resp *fasthttp.Response
	err  error
	// served is the index of the target that answered, or failed last.
	served int
	// call is the span of a call whose answer is streamed: close ends it.
	call *telemetry.Call
}

// close ends the call (complete: the body was read to its end) and releases
// the response.
func (r *sendResult) close(complete bool) {
	r.call.EndStream(complete, "")
	r.call = nil
	if r.cl != nil {
		r.cl.Close(complete)
		r.cl = nil
	}
	if r.resp != nil {
		fasthttp.ReleaseResponse(r.resp)
		r.resp = nil
	}
}

// failed reports a result that is a failure to pass on: an error, or an answer
// kept from a failed attempt.
func (r *sendResult) failed() bool { return r.err != nil || r.resp != nil }

// errNoUpstream is the failure of a call planned with no target.
var errNoUpstream = errors.New("no upstream to call")

// send makes the call: each target in turn from sp.first, each with its retries,
// until one gives an answer to relay. When all are exhausted it returns the last
// answer an upstream gave (a 429, a 503 — upstream errors pass through unchanged),
// else the last error. The caller closes the result.
//
// With tracing on the call is a span (telemetry.Call), each try a span under it.
func (s *Server) send(ctx context.Context, sp *sendPlan) sendResult {
	if s.tel == nil {
		return s.sendAll(ctx, sp)
	}
	kind := sp.kind
	if kind == "" {
		if kind = interceptors.CallKind(ctx); kind == "" {
			kind = interceptors.CallKindDraft
		}
	}
	sp.call = s.tel.StartCall(ctx, kind, sp.path, sp.body)
	r := s.sendAll(ctx, sp)
	switch {
	case r.err != nil:
		sp.call.Fail(r.err)
	case r.cl != nil && r.cl.stream:
		r.call = sp.call // the answer is still to be read
	default:
		sp.call.Answer(r.resp.StatusCode(), r.resp.Body())
	}
	return r
}

// sendAll is send, without its span.
func (s *Server) sendAll(ctx context.Context, sp *sendPlan) sendResult {
	last := sendResult{err: errNoUpstream}
	n := len(sp.targets)
	for i := 0; i < n; i++ {
		idx := (sp.first + i) % n
		r, final := s.sendTo(ctx, sp, idx)
		if final {
			last.close(false)
			return r
		}
		if r.resp != nil || last.resp == nil {
			last.close(false)
			last = r
		} else {
			r.close(false)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return last
}

// sendTo tries one target with its retries. final reports a result to return as
// it is (an answer to relay, a failure no other upstream may repair, the client
// gone); otherwise the result is this upstream's failure and the next one is tried.
func (s *Server) sendTo(ctx context.Context, sp *sendPlan, idx int) (sendResult, bool) {
	t := &sp.targets[idx]
	up := t.up
	usePool := up.keys.size() > 0 && s.usesOwnKey(sp.header, t.foreign)
	pool := up.keys
	last := sendResult{served: idx}
	var tried uint64         // pool keys that failed since the last wait
	var waited time.Duration // waited before the next attempt
	retries := 0
	// retry waits d before the next attempt, if the policy and the deadline allow.
	retry := func(d time.Duration) (wait, stop bool) {
		if retries >= t.retry.maxRetries || d > t.retry.max || !fits(ctx, d) {
			return false, false
		}
		if err := sleep(ctx, d); err != nil {
			return false, true
		}
		retries++
		waited, tried = d, 0
		return true, false
	}
	for {
		now := time.Now()
		ok, probe, retryIn := up.breaker.admit(now)
		if !ok {
			if last.failed() {
				return last, false
			}
			s.noteAttempt(sp, up, "", 0, outcomeCircuitOpen, nil, waited, 0)
			return sendResult{served: idx, err: &unavailableError{upstream: up.name, why: "its circuit breaker is open after repeated failures", retryIn: retryIn}}, false
		}
		var key *poolKey
		ki := -1
		if usePool {
			if key, ki = pool.pick(now, tried); key == nil {
				up.breaker.record(probe, verdictNone, now)
				ready := pool.readyIn(now, 0)
				if wait, stop := retry(ready); stop {
					last.close(false)
					return sendResult{served: idx, err: ctx.Err()}, true
				} else if wait {
					continue
				}
				if last.failed() {
					return last, false
				}
				s.noteAttempt(sp, up, "", 0, outcomeKeysCooling, nil, waited, 0)
				return sendResult{served: idx, err: &unavailableError{upstream: up.name, why: "every key is cooling down after 401 or 429 answers", retryIn: ready}}, false
			}
		}
		keyValue, keyName := "", ""
		if key != nil {
			keyValue, keyName = key.value, key.env
		}
		req := fasthttp.AcquireRequest()
		if sp.build != nil {
			sp.build(req, t, keyValue)
		} else {
			sp.caller.buildPost(req, t, keyValue, sp.path, sp.body)
		}
		try := sp.call.StartTry(req, up.name, keyName, idx != sp.first, waited)
		resp := fasthttp.AcquireResponse()
		start := time.Now()
		cl, err := up.do(ctx, req, resp, sp.stream, sp.maxBody)
		fasthttp.ReleaseRequest(req)
		took := time.Since(start)
		status := 0
		if err == nil {
			status = resp.StatusCode()
		}
		class := classifyAttempt(ctx, err, status)
		try.End(status, class.outcome, err)
		up.breaker.record(probe, class.verdict, time.Now())
		s.noteAttempt(sp, up, keyName, status, class.outcome, err, waited, took)
		waited = 0
		poolKeyFailed := key != nil && pool.size() > 1 && (status == 401 || status == 429)
		switch {
		case class.kind == attemptSkip:
			fasthttp.ReleaseResponse(resp)
			last.close(false)
			return sendResult{served: idx, err: err}, false
		case class.kind == attemptFinal || (class.kind == attemptKeyRejected && !poolKeyFailed):
			last.close(false)
			if err != nil {
				fasthttp.ReleaseResponse(resp)
				return sendResult{served: idx, err: err}, true
			}
			return sendResult{cl: cl, resp: resp, served: idx}, true
		}
		// A failure another try may repair: keep it for the client in case
		// nothing better comes.
		last.close(false)
		hint, hinted := time.Duration(0), false
		if err != nil {
			fasthttp.ReleaseResponse(resp)
			last = sendResult{served: idx, err: err}
		} else {
			hint, hinted = retryHint(&resp.Header, time.Now())
			last = sendResult{served: idx, resp: keepAnswer(cl, resp)}
		}
		if poolKeyFailed {
			// The key is at fault, not the upstream: the others carry on at once.
			cooldown := up.keyCooldown
			if status == 429 {
				cooldown = min(t.retry.base<<min(retries, 16), up.keyCooldown)
				if hinted {
					cooldown = min(hint, up.keyCooldown)
				}
			}
			if pool.cool(key, time.Now(), cooldown) {
				s.metrics.keyCooldowns.WithLabelValues(up.name, key.env).Inc()
				s.log.Debug("upstream key cooling down", "upstream", up.name, "key", key.env, "status", status, "cooldown", cooldown.String())
			}
			tried |= 1 << ki
			continue
		}
		d, ok := t.retry.wait(retries, hint, hinted)
		if !ok {
			return last, false
		}
		if wait, stop := retry(d); stop {
			last.close(false)
			return sendResult{served: idx, err: ctx.Err()}, true
		} else if !wait {
			return last, false
		}
	}
}

// Outcomes of an upstream attempt (factgate_upstream_attempts_total, the trace).
const (
	outcomeOK           = "ok"
	outcomeClientError  = "client_error"
	outcomeUnauthorized = "unauthorized"
	outcomeRateLimited  = "rate_limited"
	outcomeServerError  = "server_error"
	outcomeConnectError = "connect_error"
	outcomeTimeout      = "timeout"
	outcomeFailed       = "failed"
	outcomeSaturated    = "saturated"
	outcomeCancelled    = "cancelled"
	outcomeCircuitOpen  = "circuit_open"
	outcomeKeysCooling  = "keys_cooling"
)

// attemptKind is what an attempt's outcome means for the call.
type attemptKind int8

const (
	attemptFinal       attemptKind = iota // relay it (an answer, or a failure not to repeat)
	attemptRetry                          // the provider did no work: try again, then the next upstream
	attemptKeyRejected                    // 401: another pool key may do; else final
	attemptSkip                           // not this upstream now (saturated): the next one
)

type attemptClass struct {
	outcome string
	verdict breakerVerdict
	kind    attemptKind
}

// classifyAttempt sorts an attempt's transport error or status.
func classifyAttempt(ctx context.Context, err error, status int) attemptClass {
	if err != nil {
		var de *dialError
		var ne net.Error
		switch {
		case ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return attemptClass{outcomeCancelled, verdictNone, attemptFinal}
		case errors.Is(err, errUpstreamBusy):
			return attemptClass{outcomeSaturated, verdictNone, attemptSkip}
		case errors.As(err, &de):
			// Not a byte of the request was written: safe to send again.
			return attemptClass{outcomeConnectError, verdictFailure, attemptRetry}
		case errors.Is(err, fasthttp.ErrTimeout) || (errors.As(err, &ne) && ne.Timeout()):
			return attemptClass{outcomeTimeout, verdictFailure, attemptFinal}
		}
		return attemptClass{outcomeFailed, verdictFailure, attemptFinal}
	}
	switch {
	case status < 400:
		return attemptClass{outcomeOK, verdictSuccess, attemptFinal}
	case status == fasthttp.StatusUnauthorized:
		return attemptClass{outcomeUnauthorized, verdictSuccess, attemptKeyRejected}
	case status == fasthttp.StatusTooManyRequests:
		return attemptClass{outcomeRateLimited, verdictSuccess, attemptRetry}
	case status == fasthttp.StatusBadGateway, status == fasthttp.StatusServiceUnavailable, status == fasthttp.StatusGatewayTimeout:
		return attemptClass{outcomeServerError, verdictFailure, attemptRetry}
	case status >= 500:
		return attemptClass{outcomeServerError, verdictFailure, attemptFinal}
	}
	return attemptClass{outcomeClientError, verdictSuccess, attemptFinal}
}

// maxKeptErrorBody bounds the body of a failed attempt's answer kept for the
// client while other attempts are made (error bodies are small).
const maxKeptErrorBody = 64 << 10

// keepAnswer reads the answer of a failed attempt whole and ends its call, so it
// can be relayed later if no other attempt does better.
func keepAnswer(cl *call, resp *fasthttp.Response) *fasthttp.Response {
	if !cl.stream {
		cl.Close(true)
		return resp
	}
	body, err := io.ReadAll(io.LimitReader(cl.body(), maxKeptErrorBody+1))
	complete := err == nil && len(body) <= maxKeptErrorBody
	body = body[:min(len(body), maxKeptErrorBody)]
	cl.Close(complete)
	kept := fasthttp.AcquireResponse()
	resp.Header.CopyTo(&kept.Header)
	kept.Header.Del("Transfer-Encoding")
	kept.SetBody(body)
	kept.Header.SetContentLength(len(body))
	fasthttp.ReleaseResponse(resp)
	return kept
}

// noteAttempt counts an attempt and adds it to the trace.
func (s *Server) noteAttempt(sp *sendPlan, up *upstream, key string, status int, outcome string, err error, waited, took time.Duration) {
	s.attemptCounter(up, outcome).Inc()
	a := interceptors.UpstreamAttempt{Upstream: up.name, Key: key, Status: status, Outcome: outcome,
		Wait: units.Millis(waited), Duration: units.Millis(took)}
	if err != nil {
		a.Error = err.Error()
	}
	if sp.trace != nil {
		sp.trace.AddUpstreamAttempt(a)
	}
	if outcome == outcomeCircuitOpen || outcome == outcomeKeysCooling {
		sp.call.Skip(up.name, outcome)
	}
	if outcome != outcomeOK && outcome != outcomeClientError {
		s.log.LogAttrs(context.Background(), slog.LevelDebug, "upstream attempt failed",
			slog.String("upstream", up.name), slog.String("key", key), slog.Int("status", status),
			slog.String("outcome", outcome), slog.String("error", a.Error), slog.Float64("duration_ms", ms(took)))
	}
}

// attemptCounter is factgate_upstream_attempts_total for an attempt of up with
// outcome; the counter of its successful attempts, counted on every request, is
// kept on the upstream after its first use.
func (s *Server) attemptCounter(up *upstream, outcome string) prometheus.Counter {
	if outcome != outcomeOK {
		return s.metrics.attempts.WithLabelValues(up.name, outcome)
	}
	if c := up.okAttempts.Load(); c != nil {
		return *c
	}
	c := s.metrics.attempts.WithLabelValues(up.name, outcome)
	up.okAttempts.Store(&c)
	return c
}

// unavailableError is the failure of an upstream that got no call: its circuit is
// open, or every key of its pool is cooling down.
type unavailableError struct {
	upstream, why string
	// retryIn is when it may be tried again (0: unknown).
	retryIn time.Duration
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("upstream %q is unavailable: %s", e.upstream, e.why)
}

// setRetryAfter tells the client when to come back from an unavailable upstream.
func setRetryAfter(h *fasthttp.ResponseHeader, err error) {
	var ue *unavailableError
	if errors.As(err, &ue) {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(ue.retryIn)))
	}
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// fits reports whether waiting d leaves time before ctx's deadline.
func fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
