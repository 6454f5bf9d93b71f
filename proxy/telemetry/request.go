package telemetry

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/factgate/factgate/interceptors"
)

// Request is the server span of one proxied request. A nil *Request (tracing
// off) does nothing.
type Request struct {
	t    *Telemetry
	span *span
	ctx  context.Context
	// continued: the client sent a valid traceparent, and the span continues its
	// trace.
	continued bool

	mu    sync.Mutex
	ended bool
	// errType is the error.type of a request that failed (a factgate error code,
	// or the upstream's status).
	errType string
	// attrs are the span's attributes, set when it ends, in one call (the SDK
	// copies them once); nil when the span records nothing.
	attrs []attribute.KeyValue
}

// Key is the fasthttp user value under which the proxy keeps a request's
// *Request.
const Key = "factgate.telemetry"

// StartRequest starts the server span of a request, continuing the trace of the
// client's traceparent (and tracestate) when it sent a valid one.
func (t *Telemetry) StartRequest(rc *fasthttp.RequestCtx, start time.Time) *Request {
	if t == nil {
		return nil
	}
	parent := context.Background()
	if len(rc.Request.Header.PeekCanonical(headerTraceparent)) > 0 {
		parent = t.prop.Extract(parent, requestCarrier{&rc.Request.Header})
	}
	remote := trace.SpanContextFromContext(parent)
	method := methodName(rc.Method())
	var name, path string
	switch string(rc.Path()) {
	// The routes factgate knows; other paths (ids in them) would make a span name
	// per object.
	case "/v1/chat/completions":
		path, name = "/v1/chat/completions", "POST /v1/chat/completions"
	case "/v1/responses":
		path, name = "/v1/responses", "POST /v1/responses"
	case "/v1/models", "/v1/embeddings", "/v1/completions":
		path = string(rc.Path())
		name = method + " " + path
	default:
		path, name = string(rc.Path()), method
	}
	if method != "POST" && (path == "/v1/chat/completions" || path == "/v1/responses") {
		name = method + " " + path
	}
	ctx, span := t.start(parent, name, trace.SpanKindServer, start, nil)
	r := &Request{t: t, span: span, ctx: ctx, continued: remote.IsValid()}
	if span.IsRecording() {
		attrs := getAttrs()
		attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method), semconv.URLPath(path), semconv.URLScheme("http"))
		if ua := rc.Request.Header.UserAgent(); len(ua) > 0 {
			attrs = append(attrs, semconv.UserAgentOriginal(string(ua)))
		}
		if addr := rc.RemoteIP(); addr != nil {
			attrs = append(attrs, semconv.ClientAddress(addr.String()))
		}
		r.attrs = attrs
	}
	return r
}

// headerTraceparent is the W3C header, in fasthttp's canonical form.
var headerTraceparent = []byte("Traceparent")

// Context is the context that carries the request's span: the parent of the
// request's calls and of the stages' spans. Background when r is nil.
func (r *Request) Context() context.Context {
	if r == nil {
		return context.Background()
	}
	return r.ctx
}

// Continued reports whether the request continues the trace of the client's
// traceparent.
func (r *Request) Continued() bool { return r != nil && r.continued }

// TraceParent is the W3C traceparent of the request's server span
// ("00-<trace id>-<span id>-<flags>"); "" when r is nil.
func (r *Request) TraceParent() string {
	if r == nil {
		return ""
	}
	sc := r.span.SpanContext()
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// Adopt makes the request's factgate trace and its W3C trace name each other. A
// request that starts a trace gives it its W3C trace id: X-Factgate-Trace-Id,
// the console and the tracing backend name the same trace. A request that
// continues a client's trace keeps a factgate trace id of its own — a client's
// trace spans many requests (an agent's loop), while a factgate trace is one
// request, stored under its id — and the two are linked: the span carries
// factgate.trace_id, the factgate trace the span's traceparent.
func (r *Request) Adopt(tr *interceptors.Trace) {
	if r == nil || tr == nil {
		return
	}
	sc := r.span.SpanContext()
	if !r.continued && sc.TraceID().IsValid() {
		tr.ID = sc.TraceID().String()
	}
	tr.TraceParent = r.TraceParent()
	r.mu.Lock()
	if r.attrs != nil {
		r.attrs = append(r.attrs, attrTraceID.String(tr.ID))
	}
	r.mu.Unlock()
}

// Fail records the factgate error code a request failed with (error.type).
func (r *Request) Fail(code string) {
	if r == nil || code == "" {
		return
	}
	r.mu.Lock()
	r.errType = code
	r.mu.Unlock()
}

// Finish records what the chain of an intercepted request did — route, variant,
// pack, issues, revisions, outcome, downgrades, the upstream that served, the
// tokens — and, with content on, the client's messages (as the chain saw them:
// a Responses request's chat translation) and the answer it got. Call it before
// the exchange is released.
func (r *Request) Finish(ex *interceptors.Exchange, pack, upstream string) {
	if r == nil || r.attrs == nil {
		return
	}
	attrs := getAttrs()
	defer putAttrs(attrs)
	attrs = append(attrs, attrRoute.String(ex.Route), attrModel.String(ex.Model))
	if upstream != "" {
		attrs = append(attrs, attrUpstream.String(upstream))
	}
	if pack != "" {
		attrs = append(attrs, attrPack.String(pack))
	}
	if v := ex.Overrides.Variant; v != "" {
		attrs = append(attrs, attrVariant.String(v))
	}
	if ex.ClientKey != "" {
		attrs = append(attrs, attrClientKey.String(ex.ClientKey))
	}
	if ex.Validated() {
		attrs = append(attrs,
			attrIssuesDraft.String(interceptors.CountSeverities(ex.DraftIssues).String()),
			attrIssuesFinal.String(interceptors.CountSeverities(ex.Issues).String()),
			attrIssuesDelivered.String(interceptors.CountSeverities(ex.DeliveredIssues).String()))
	}
	attrs = append(attrs, attrRevisions.Int(ex.Revisions))
	if ex.Usage != (interceptors.Usage{}) {
		attrs = append(attrs, attrInputTokens.Int(ex.Usage.PromptTokens), attrOutputTokens.Int(ex.Usage.CompletionTokens))
	}
	ex.Trace.Do(func(t *interceptors.Trace) {
		if t.KnowledgeSet != "" {
			attrs = append(attrs, attrKnowledgeSet.String(t.KnowledgeSet))
		}
		if t.Final != nil {
			attrs = append(attrs, attrOutcome.String(t.Final.Outcome))
		}
		attrs = append(attrs, attrDowngrades.Int(len(t.Downgrades)))
		if t.ValidationIncomplete {
			attrs = append(attrs, attrValidationIncomplete.Bool(true))
		}
		if t.Notice != nil {
			attrs = append(attrs, attrNotice.String(t.Notice.Mode))
		}
	})
	if r.t.content {
		in, _ := inputMessages(ex.Original)
		attrs = appendContent(attrs, semconv.GenAIInputMessagesKey, in)
		if ex.Response.OK() {
			attrs = appendContent(attrs, semconv.GenAIOutputMessagesKey, outputMessages(ex.Response.Body))
		}
	}
	r.mu.Lock()
	r.attrs = append(r.attrs, attrs...)
	r.mu.Unlock()
}

// End ends the server span with the status the client got (a stream that broke
// or a client that went away: the status the proxy recorded, 502 or 499) and the
// error code of a failure ("" for none). Only the first call counts.
func (r *Request) End(status int, code string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.ended = true
	if code == "" {
		code = r.errType
	}
	attrs := r.attrs
	r.attrs = nil
	r.mu.Unlock()
	if attrs != nil {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
		if code != "" {
			attrs = append(attrs, attrError.String(code))
		}
		// A server span is in error for a 5xx only: a 4xx is the client's.
		if status >= 500 {
			if code == "" {
				code = strconv.Itoa(status)
			}
			attrs = append(attrs, semconv.ErrorTypeKey.String(code))
			r.span.SetStatus(codes.Error, code)
		}
	}
	r.span.finish(time.Time{}, attrs)
}

// Ended reports whether End was called.
func (r *Request) Ended() bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// requestCarrier reads and writes W3C trace context headers on a fasthttp
// request.
type requestCarrier struct{ h *fasthttp.RequestHeader }

func (c requestCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c requestCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c requestCarrier) Keys() []string {
	var keys []string
	for k := range c.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}
