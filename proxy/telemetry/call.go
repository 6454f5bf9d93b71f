package telemetry

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// Call is the span of one upstream call — the relayed request, the draft, a
// revision, a repair, a judge call — named and attributed per the GenAI
// semantic conventions ("chat gpt-4o", gen_ai.*), covering every try of it.
//
// A call of one try (the usual one) is one span: it carries the try's HTTP
// attributes (the upstream, the key's name, server.address, the status) and is
// the parent the upstream gets in traceparent. A call that tries again (a retry,
// a fallback upstream) has a span per try under it ("POST", kind client): the
// first try's is made when the second starts, from what was recorded of it —
// its upstream saw the call's span as the parent —, and each later try's
// traceparent names its own span. A call to a path that is no GenAI operation
// (GET /v1/models, files) has no span of its own: each of its tries is a span
// under the request's. A nil *Call does nothing.
//
// A Call is used by one goroutine at a time: the one sending, then the one
// relaying the answer.
type Call struct {
	t    *Telemetry
	span *span // nil: no GenAI operation, tries go under ctx
	ctx  context.Context
	op   string
	// responses: the call speaks the Responses API (its body and answer).
	responses bool
	tries     int
	// outcome is the last try's (the call's failure, when it failed).
	outcome string
	stream  *streamScan
	ended   bool
	// attrs are the span's attributes, set when it ends, in one call: the SDK
	// copies them once (each SetAttributes grows its slice anew). Nil when the
	// span records nothing.
	attrs []attribute.KeyValue
	// first is the first try, recorded in attrs (attrs[first.from:first.to])
	// rather than as a span of its own until a second try makes one needed.
	first firstTry
}

// firstTry is what a call records of its first try: its attributes are
// attrs[from-1:to] (the provider first), of which attrs[from:http] only on a span
// of its own.
type firstTry struct {
	from, http, to int
	start, end     time.Time
	err            error
	status         int
}

// The kinds of call (factgate.call.kind).
const (
	KindRelay = "relay" // a request relayed as it is (a route without stages, a pass-through)
)

// StartCall starts the span of a call of kind (relay, draft, revision, repair,
// judge) POSTing body to path (the client-facing path, "/v1/chat/completions"),
// under the span in ctx.
func (t *Telemetry) StartCall(ctx context.Context, kind, path string, body []byte) *Call {
	if t == nil {
		return nil
	}
	c := &Call{t: t, ctx: ctx}
	var api string
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		c.op, api = "chat", "chat_completions"
	case strings.HasSuffix(path, "/responses"):
		c.op, api, c.responses = "chat", "responses", true
	case strings.HasSuffix(path, "/embeddings"):
		c.op = "embeddings"
	case strings.HasSuffix(path, "/completions"):
		c.op = "text_completion"
	default:
		return c
	}
	// The request's attributes are read only when the request's span is sampled
	// (the samplers factgate takes from OTEL_TRACES_SAMPLER decide alike for a
	// trace's spans).
	psc := trace.SpanContextFromContext(ctx)
	var model string
	if psc.IsSampled() || !psc.IsValid() {
		attrs := getAttrs()
		attrs = append(attrs, semconv.GenAIOperationNameKey.String(c.op), attrCallKind.String(kind))
		if api != "" {
			attrs = append(attrs, semconv.OpenAIAPITypeKey.String(api))
		}
		attrs, model = requestAttributes(attrs, body, c.responses)
		if t.content {
			var in, sys string
			if c.responses {
				in, sys = responsesInput(body)
			} else {
				in, sys = inputMessages(body)
			}
			attrs = appendContent(attrs, semconv.GenAIInputMessagesKey, in)
			attrs = appendContent(attrs, semconv.GenAISystemInstructionsKey, sys)
		}
		c.attrs = attrs
	} else {
		model = gjson.GetBytes(body, "model").Str
	}
	name := c.op
	if model != "" {
		name += " " + model
	}
	c.ctx, c.span = t.start(ctx, name, trace.SpanKindClient, time.Time{}, nil)
	return c
}

// view is b as a string without a copy, for reading b with gjson while b does
// not change: a string kept from it (an attribute) is cloned first.
//
// unsafe: a string over b without a copy, read only while b is unchanged (docs/architecture.md, Lifetimes).
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func appendContent(attrs []attribute.KeyValue, k attribute.Key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, k.String(v))
}

// requestAttributes reads the request parameters that were set, and the model,
// in one walk of the body's members (rawjson skips a long "messages" a word at a
// time). Every string kept is cloned: body is a buffer the proxy reuses.
func requestAttributes(attrs []attribute.KeyValue, body []byte, responses bool) ([]attribute.KeyValue, string) {
	var model string
	rawjson.EachMember(view(body), func(m rawjson.Member) bool {
		raw := m.Raw
		switch rawjson.Key(m.Key) {
		case "model":
			if v, ok := rawjson.StringValue(raw); ok {
				model = strings.Clone(v)
				attrs = append(attrs, semconv.GenAIRequestModel(model))
			}
		case "temperature":
			if f, ok := number(raw); ok {
				attrs = append(attrs, semconv.GenAIRequestTemperature(f))
			}
		case "top_p":
			if f, ok := number(raw); ok {
				attrs = append(attrs, semconv.GenAIRequestTopP(f))
			}
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			if f, ok := number(raw); ok {
				attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(f)))
			}
		case "frequency_penalty":
			if f, ok := number(raw); ok {
				attrs = append(attrs, semconv.GenAIRequestFrequencyPenalty(f))
			}
		case "presence_penalty":
			if f, ok := number(raw); ok {
				attrs = append(attrs, semconv.GenAIRequestPresencePenalty(f))
			}
		case "seed":
			if f, ok := number(raw); ok {
				attrs = append(attrs, semconv.GenAIRequestSeed(int(f)))
			}
		case "n":
			if f, ok := number(raw); ok && f != 1 {
				attrs = append(attrs, semconv.GenAIRequestChoiceCount(int(f)))
			}
		case "stop":
			var stops []string
			if v, ok := rawjson.StringValue(raw); ok {
				stops = []string{strings.Clone(v)}
			} else {
				rawjson.EachElement(raw, func(e rawjson.Value) bool {
					if v, ok := rawjson.StringValue(e.Raw); ok {
						stops = append(stops, strings.Clone(v))
					}
					return true
				})
			}
			if len(stops) > 0 {
				attrs = append(attrs, semconv.GenAIRequestStopSequences(stops...))
			}
		case "response_format":
			if t := outputType(gjson.Get(raw, "type").Str); t != "" {
				attrs = append(attrs, semconv.GenAIOutputTypeKey.String(t))
			}
		case "text":
			if responses {
				if t := outputType(gjson.Get(raw, "format.type").Str); t != "" {
					attrs = append(attrs, semconv.GenAIOutputTypeKey.String(t))
				}
			}
		case "service_tier":
			if v, ok := rawjson.StringValue(raw); ok {
				attrs = append(attrs, semconv.OpenAIRequestServiceTierKey.String(strings.Clone(v)))
			}
		}
		return true
	})
	return attrs, model
}

// number reads a raw JSON number.
func number(raw string) (float64, bool) {
	if raw == "" || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(raw, 64)
	return f, err == nil
}

func outputType(format string) string {
	switch format {
	case "json_object", "json_schema":
		return "json"
	case "text":
		return "text"
	}
	return ""
}

// Try is one try of a call: one HTTP request to one upstream. A nil *Try does
// nothing.
type Try struct {
	c         *Call
	span      *span // nil: the call's first try, recorded in the call
	recording bool
}

// StartTry starts a try of the call: req is the request about to be sent to the
// upstream named upstream (key names the provider key's environment variable, ""
// for none); fallback says the upstream is not the first the call tried, waited
// is the backoff before the try. The upstream gets the traceparent of the try's
// span — the call's for its first try — and the client's tracestate, in place of
// the client's.
func (c *Call) StartTry(req *fasthttp.Request, upstream, key string, fallback bool, waited time.Duration) *Try {
	if c == nil {
		return nil
	}
	resend := c.tries
	c.tries++
	method := methodName(req.Header.Method())
	psc := trace.SpanContextFromContext(c.ctx)
	recording := psc.IsSampled() || !psc.IsValid()
	if resend == 1 && c.span != nil {
		c.spanFirstTry() // a second try: the first becomes a span of its own
	}
	t := &Try{c: c, recording: recording}
	ctx := c.ctx
	if resend == 0 && c.span != nil {
		// The call's first try: its attributes are the call's until a second
		// try comes.
		if recording {
			c.attrs = append(c.attrs, c.provider(upstream))
		}
		c.first = firstTry{start: time.Now(), from: len(c.attrs)}
		if recording {
			// The method and path are the try's own: on the call's span its
			// operation says them.
			c.attrs = appendHTTP(c.attrs, req, method)
			c.first.http = len(c.attrs)
			c.attrs = c.tryAttributes(c.attrs, req, upstream, key, resend, fallback, waited)
		}
		c.first.to = len(c.attrs)
	} else {
		var attrs []attribute.KeyValue
		if recording {
			provider := c.provider(upstream)
			attrs = append(getAttrs(), provider)
			attrs = appendHTTP(attrs, req, method)
			attrs = c.tryAttributes(attrs, req, upstream, key, resend, fallback, waited)
			// The call's provider is the one of the upstream tried last.
			c.attrs = append(c.attrs, provider)
		}
		ctx, t.span = c.t.start(c.ctx, method, trace.SpanKindClient, time.Time{}, attrs)
	}
	req.Header.Del("traceparent")
	req.Header.Del("tracestate")
	c.t.prop.Inject(ctx, requestCarrier{&req.Header})
	return t
}

// provider is gen_ai.provider.name for a try of upstream.
func (c *Call) provider(upstream string) attribute.KeyValue {
	return semconv.GenAIProviderNameKey.String(c.t.providerName(upstream))
}

// tryAttributes appends a try's upstream attributes to attrs.
func (c *Call) tryAttributes(attrs []attribute.KeyValue, req *fasthttp.Request, upstream, key string, resend int, fallback bool, waited time.Duration) []attribute.KeyValue {
	attrs = append(attrs, attrTryUpstream.String(upstream))
	host := string(req.Header.Host())
	if h, p, err := net.SplitHostPort(host); err == nil {
		attrs = append(attrs, semconv.ServerAddress(h))
		if n, err := strconv.Atoi(p); err == nil {
			attrs = append(attrs, semconv.ServerPort(n))
		}
	} else if host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
	}
	if key != "" {
		attrs = append(attrs, attrTryKey.String(key))
	}
	if resend > 0 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(resend))
	}
	if fallback {
		attrs = append(attrs, attrTryFallback.Bool(true))
	}
	if waited > 0 {
		attrs = append(attrs, attrTryWait.Float64(float64(waited)/float64(time.Millisecond)))
	}
	return attrs
}

// appendHTTP appends a try's method and path.
func appendHTTP(attrs []attribute.KeyValue, req *fasthttp.Request, method string) []attribute.KeyValue {
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method))
	if uri := req.Header.RequestURI(); len(uri) > 0 {
		path, _, _ := strings.Cut(string(uri), "?")
		attrs = append(attrs, semconv.URLPath(path))
	}
	return attrs
}

// spanFirstTry makes the span of the call's first try from what was recorded,
// and takes its attributes off the call's (the provider stays).
func (c *Call) spanFirstTry() {
	f := &c.first
	var attrs []attribute.KeyValue
	if f.to > f.from {
		attrs = append(getAttrs(), c.attrs[f.from-1:f.to]...)
		c.attrs = c.attrs[:f.from]
	}
	_, span := c.t.start(c.ctx, "POST", trace.SpanKindClient, f.start, attrs)
	if f.err != nil {
		span.SetStatus(codes.Error, f.err.Error())
	} else if f.status >= 400 {
		span.SetStatus(codes.Error, "")
	}
	span.finish(f.end, nil)
	c.first = firstTry{}
}

// methodName is the request's method as a constant string for the usual ones.
func methodName(m []byte) string {
	switch string(m) {
	case "POST":
		return "POST"
	case "GET":
		return "GET"
	}
	return string(m)
}

// End ends the try: the upstream's status (0 when none came), how the try ended
// (the outcome factgate_upstream_attempts_total counts) and its transport error.
func (t *Try) End(status int, outcome string, err error) {
	if t == nil {
		return
	}
	t.c.outcome = outcome
	if t.span == nil { // the first try: the call keeps it
		c := t.c
		c.first.end, c.first.err, c.first.status = time.Now(), err, status
		if t.recording {
			c.attrs = appendTryEnd(c.attrs, status, outcome, err)
			c.first.to = len(c.attrs)
		}
		return
	}
	var end []attribute.KeyValue
	if t.recording {
		end = appendTryEnd(getAttrs(), status, outcome, err)
		if err != nil {
			t.span.SetStatus(codes.Error, err.Error())
		} else if status >= 400 {
			t.span.SetStatus(codes.Error, "")
		}
	}
	t.span.finish(time.Time{}, end)
}

// appendTryEnd appends how a try ended: its outcome, the upstream's status and
// error.type.
func appendTryEnd(attrs []attribute.KeyValue, status int, outcome string, err error) []attribute.KeyValue {
	attrs = append(attrs, attrTryOutcome.String(outcome))
	if status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
	}
	switch {
	case err != nil:
		attrs = append(attrs, semconv.ErrorTypeKey.String(outcome))
	case status >= 400:
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(status)))
	}
	return attrs
}

// Skip records an upstream the call passed over without a try (its circuit is
// open, its keys are cooling down) as an event of the call.
func (c *Call) Skip(upstream, outcome string) {
	if c == nil {
		return
	}
	var span trace.Span = c.span
	if c.span == nil {
		span = trace.SpanFromContext(c.ctx)
	}
	span.AddEvent("factgate.upstream.skipped", trace.WithAttributes(attrTryUpstream.String(upstream), attrTryOutcome.String(outcome)))
}

// Answer records the answer of the call, read whole: the gen_ai.response.*
// attributes and the usage of a JSON answer (a chat completion or a Responses
// object), error.type for a status of 400 or more, and the output messages with
// content on. The call then ends.
func (c *Call) Answer(status int, body []byte) {
	if c == nil || c.ended {
		return
	}
	if c.attrs != nil {
		if status >= 400 {
			c.fail(strconv.Itoa(status), "the upstream answered with status "+strconv.Itoa(status))
		} else {
			// body is read in place: answerAttributes clones what it keeps.
			c.attrs = c.answerAttributes(c.attrs, gjson.Parse(view(body)), body)
		}
	}
	c.end()
}

// answerAttributes reads the response attributes of an answer (or of a Responses
// stream's final response object).
func (c *Call) answerAttributes(attrs []attribute.KeyValue, r gjson.Result, raw []byte) []attribute.KeyValue {
	var reasons []string
	// One walk of the answer's members; every string kept is cloned (the answer
	// is a view of a buffer that is reused).
	rawjson.EachMember(r.Raw, func(m rawjson.Member) bool {
		raw := m.Raw
		switch rawjson.Key(m.Key) {
		case "id":
			if v, ok := rawjson.StringValue(raw); ok {
				attrs = append(attrs, semconv.GenAIResponseID(strings.Clone(v)))
			}
		case "model":
			if v, ok := rawjson.StringValue(raw); ok {
				attrs = append(attrs, semconv.GenAIResponseModel(strings.Clone(v)))
			}
		case "status":
			if v, ok := rawjson.StringValue(raw); ok && c.responses {
				reasons = append(reasons, strings.Clone(v))
			}
		case "choices":
			rawjson.EachElement(raw, func(ch rawjson.Value) bool {
				if f, ok := rawjson.Find(ch.Raw, "finish_reason"); ok {
					if v, ok := rawjson.StringValue(f.Raw); ok {
						reasons = append(reasons, strings.Clone(v))
					}
				}
				return true
			})
		case "usage":
			attrs = appendUsage(attrs, raw)
		case "service_tier":
			if v, ok := rawjson.StringValue(raw); ok {
				attrs = append(attrs, semconv.OpenAIResponseServiceTierKey.String(strings.Clone(v)))
			}
		case "system_fingerprint":
			if v, ok := rawjson.StringValue(raw); ok {
				attrs = append(attrs, semconv.OpenAIResponseSystemFingerprintKey.String(strings.Clone(v)))
			}
		}
		return true
	})
	if len(reasons) > 0 {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(reasons...))
	}
	if c.t.content && raw != nil {
		out := ""
		if c.responses {
			out = responsesOutput(r)
		} else {
			out = outputMessages(raw)
		}
		attrs = appendContent(attrs, semconv.GenAIOutputMessagesKey, out)
	}
	return attrs
}

// appendUsage reads a chat completion's usage (prompt_tokens, completion_tokens)
// or a Responses object's (input_tokens, output_tokens), raw JSON.
func appendUsage(attrs []attribute.KeyValue, usage string) []attribute.KeyValue {
	var in, out, cached float64
	var hasIn, hasOut bool
	rawjson.EachMember(usage, func(m rawjson.Member) bool {
		switch rawjson.Key(m.Key) {
		case "prompt_tokens", "input_tokens":
			in, hasIn = number(m.Raw)
		case "completion_tokens", "output_tokens":
			out, hasOut = number(m.Raw)
		case "prompt_tokens_details", "input_tokens_details":
			if v, ok := rawjson.Find(m.Raw, "cached_tokens"); ok {
				cached, _ = number(v.Raw)
			}
		}
		return true
	})
	if hasIn {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(int(in)))
	}
	if hasOut {
		attrs = append(attrs, semconv.GenAIUsageOutputTokens(int(out)))
	}
	if cached > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(cached)))
	}
	return attrs
}

// Fail ends the call as failed: err is why (the last try's outcome names its
// error.type).
func (c *Call) Fail(err error) {
	if c == nil || c.ended {
		return
	}
	if c.attrs != nil {
		typ := c.outcome
		if typ == "" {
			typ = "error"
		}
		c.fail(typ, err.Error())
	}
	c.end()
}

func (c *Call) fail(typ, msg string) {
	c.attrs = append(c.attrs, semconv.ErrorTypeKey.String(typ))
	c.span.SetStatus(codes.Error, msg)
}

// end sets the span's attributes and ends it.
func (c *Call) end() {
	c.ended = true
	if c.span == nil {
		return
	}
	if c.tries == 1 && c.first.http > c.first.from {
		// One try: its method and path are not the call's.
		c.attrs = append(c.attrs[:c.first.from], c.attrs[c.first.http:]...)
	}
	c.span.finish(time.Time{}, c.attrs)
	c.attrs = nil
}

// Stream reads the bytes of a streamed answer as they are relayed: the events'
// id, model, finish reasons and usage (and, with content on, the text) become the
// call's response attributes when it ends (EndStream).
func (c *Call) Stream(p []byte) {
	if c == nil || c.span == nil || c.attrs == nil {
		return
	}
	if c.stream == nil {
		c.stream = &streamScan{responses: c.responses, content: c.t.content}
	}
	c.stream.scan(p)
}

// EndStream ends a call whose answer was streamed: complete says the stream was
// read to its end; errType names why not ("" when it was).
func (c *Call) EndStream(complete bool, errType string) {
	if c == nil || c.ended {
		return
	}
	if c.span != nil && c.attrs != nil {
		if s := c.stream; s != nil {
			c.attrs = s.attributes(c, c.attrs)
		}
		if !complete {
			if errType == "" {
				errType = "stream_broken"
			}
			c.fail(errType, "the answer's stream did not end")
		}
	}
	c.end()
}
