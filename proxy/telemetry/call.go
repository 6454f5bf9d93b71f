package telemetry

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Call is the span of one upstream call — the relayed request, the draft, a
// revision, a repair, a judge call — named and attributed per the GenAI
// semantic conventions ("chat gpt-4o", gen_ai.*), covering every try of it:
// each try (a retry, a fallback upstream) is a Try span under it. A call to a
// path that is no GenAI operation (GET /v1/models, files) has no span of its
// own: its tries are under the request's span. A nil *Call does nothing.
//
// A Call is used by one goroutine at a time: the one sending, then the one
// relaying the answer.
type Call struct {
	t    *Telemetry
	span trace.Span // nil: no GenAI operation, tries go under ctx
	ctx  context.Context
	op   string
	// responses: the call speaks the Responses API (its body and answer).
	responses bool
	tries     int
	// outcome is the last try's (the call's failure, when it failed).
	outcome string
	stream  *streamScan
	ended   bool
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
	model := gjson.GetBytes(body, "model").Str
	name := c.op
	if model != "" {
		name += " " + model
	}
	c.ctx, c.span = t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if !c.span.IsRecording() {
		return c
	}
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs, semconv.GenAIOperationNameKey.String(c.op), attrCallKind.String(kind))
	if api != "" {
		attrs = append(attrs, semconv.OpenAIAPITypeKey.String(api))
	}
	attrs = requestAttributes(attrs, body, c.responses)
	if t.content {
		if c.responses {
			in, sys := responsesInput(body)
			attrs = appendContent(attrs, semconv.GenAIInputMessagesKey, in)
			attrs = appendContent(attrs, semconv.GenAISystemInstructionsKey, sys)
		} else {
			in, sys := inputMessages(body)
			attrs = appendContent(attrs, semconv.GenAIInputMessagesKey, in)
			attrs = appendContent(attrs, semconv.GenAISystemInstructionsKey, sys)
		}
	}
	c.span.SetAttributes(attrs...)
	return c
}

func appendContent(attrs []attribute.KeyValue, k attribute.Key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, k.String(v))
}

// requestAttributes reads the request parameters that were set.
func requestAttributes(attrs []attribute.KeyValue, body []byte, responses bool) []attribute.KeyValue {
	r := gjson.ParseBytes(body)
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			if v.Type == gjson.String {
				attrs = append(attrs, semconv.GenAIRequestModel(v.Str))
			}
		case "temperature":
			if v.Type == gjson.Number {
				attrs = append(attrs, semconv.GenAIRequestTemperature(v.Num))
			}
		case "top_p":
			if v.Type == gjson.Number {
				attrs = append(attrs, semconv.GenAIRequestTopP(v.Num))
			}
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			if v.Type == gjson.Number {
				attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(v.Int())))
			}
		case "frequency_penalty":
			if v.Type == gjson.Number {
				attrs = append(attrs, semconv.GenAIRequestFrequencyPenalty(v.Num))
			}
		case "presence_penalty":
			if v.Type == gjson.Number {
				attrs = append(attrs, semconv.GenAIRequestPresencePenalty(v.Num))
			}
		case "seed":
			if v.Type == gjson.Number {
				attrs = append(attrs, semconv.GenAIRequestSeed(int(v.Int())))
			}
		case "n":
			if v.Type == gjson.Number && v.Int() != 1 {
				attrs = append(attrs, semconv.GenAIRequestChoiceCount(int(v.Int())))
			}
		case "stop":
			var stops []string
			if v.Type == gjson.String {
				stops = []string{v.Str}
			} else if v.IsArray() {
				for _, s := range v.Array() {
					stops = append(stops, s.String())
				}
			}
			if len(stops) > 0 {
				attrs = append(attrs, semconv.GenAIRequestStopSequences(stops...))
			}
		case "response_format":
			if t := outputType(v.Get("type").Str); t != "" {
				attrs = append(attrs, semconv.GenAIOutputTypeKey.String(t))
			}
		case "text":
			if responses {
				if t := outputType(v.Get("format.type").Str); t != "" {
					attrs = append(attrs, semconv.GenAIOutputTypeKey.String(t))
				}
			}
		case "service_tier":
			if v.Type == gjson.String {
				attrs = append(attrs, semconv.OpenAIRequestServiceTierKey.String(v.Str))
			}
		}
		return true
	})
	return attrs
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

// Try is the span of one try of a call: one HTTP request to one upstream. A nil
// *Try does nothing.
type Try struct {
	c    *Call
	span trace.Span
}

// StartTry starts the span of a try of the call: req is the request about to be
// sent to the upstream named upstream (key names the provider key's environment
// variable, "" for none); fallback says the upstream is not the first the call
// tried, waited is the backoff before the try. Its http.request.resend_count
// counts the call's tries before it. The upstream gets the try's traceparent (and the client's
// tracestate) in place of the client's.
func (c *Call) StartTry(req *fasthttp.Request, upstream, key string, fallback bool, waited time.Duration) *Try {
	if c == nil {
		return nil
	}
	resend := c.tries
	c.tries++
	method := string(req.Header.Method())
	ctx, span := c.t.tracer.Start(c.ctx, method, trace.WithSpanKind(trace.SpanKindClient))
	req.Header.Del("traceparent")
	req.Header.Del("tracestate")
	c.t.prop.Inject(ctx, requestCarrier{&req.Header})
	if span.IsRecording() {
		host := string(req.Header.Host())
		attrs := make([]attribute.KeyValue, 0, 12)
		provider := semconv.GenAIProviderNameKey.String(c.t.providerName(upstream))
		attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method), attrTryUpstream.String(upstream), provider)
		if c.span != nil {
			// The call's provider is the one of the upstream tried last: the one
			// that answered.
			c.span.SetAttributes(provider)
		}
		if h, p, err := net.SplitHostPort(host); err == nil {
			attrs = append(attrs, semconv.ServerAddress(h))
			if n, err := strconv.Atoi(p); err == nil {
				attrs = append(attrs, semconv.ServerPort(n))
			}
		} else if host != "" {
			attrs = append(attrs, semconv.ServerAddress(host))
		}
		attrs = append(attrs, semconv.URLPath(string(req.URI().Path())))
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
		span.SetAttributes(attrs...)
	}
	return &Try{c: c, span: span}
}

// End ends the try: the upstream's status (0 when none came), how the try ended
// (the outcome factgate_upstream_attempts_total counts) and its transport error.
func (t *Try) End(status int, outcome string, err error) {
	if t == nil {
		return
	}
	t.c.outcome = outcome
	if t.span.IsRecording() {
		t.span.SetAttributes(attrTryOutcome.String(outcome))
		if status > 0 {
			t.span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		}
		switch {
		case err != nil:
			t.span.SetAttributes(semconv.ErrorTypeKey.String(outcome))
			t.span.SetStatus(codes.Error, err.Error())
		case status >= 400:
			t.span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			t.span.SetStatus(codes.Error, "")
		}
	}
	t.span.End()
}

// Skip records an upstream the call passed over without a try (its circuit is
// open, its keys are cooling down) as an event of the call.
func (c *Call) Skip(upstream, outcome string) {
	if c == nil {
		return
	}
	span := c.span
	if span == nil {
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
	if c.span != nil && c.span.IsRecording() {
		if status >= 400 {
			c.fail(strconv.Itoa(status), "the upstream answered with status "+strconv.Itoa(status))
		} else {
			c.span.SetAttributes(c.answerAttributes(gjson.ParseBytes(body), body)...)
		}
	}
	c.end()
}

// answerAttributes reads the response attributes of an answer (or of a Responses
// stream's final response object).
func (c *Call) answerAttributes(r gjson.Result, raw []byte) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 8)
	if id := r.Get("id"); id.Type == gjson.String {
		attrs = append(attrs, semconv.GenAIResponseID(id.Str))
	}
	if m := r.Get("model"); m.Type == gjson.String {
		attrs = append(attrs, semconv.GenAIResponseModel(m.Str))
	}
	var reasons []string
	if c.responses {
		if s := r.Get("status"); s.Type == gjson.String {
			reasons = append(reasons, s.Str)
		}
	} else {
		for _, ch := range r.Get("choices").Array() {
			if f := ch.Get("finish_reason"); f.Type == gjson.String {
				reasons = append(reasons, f.Str)
			}
		}
	}
	if len(reasons) > 0 {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(reasons...))
	}
	attrs = appendUsage(attrs, r.Get("usage"))
	if s := r.Get("service_tier"); s.Type == gjson.String {
		attrs = append(attrs, semconv.OpenAIResponseServiceTierKey.String(s.Str))
	}
	if s := r.Get("system_fingerprint"); s.Type == gjson.String {
		attrs = append(attrs, semconv.OpenAIResponseSystemFingerprintKey.String(s.Str))
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
// or a Responses object's (input_tokens, output_tokens).
func appendUsage(attrs []attribute.KeyValue, u gjson.Result) []attribute.KeyValue {
	if !u.IsObject() {
		return attrs
	}
	in, out := u.Get("prompt_tokens"), u.Get("completion_tokens")
	cached := u.Get("prompt_tokens_details.cached_tokens")
	if !in.Exists() {
		in, out = u.Get("input_tokens"), u.Get("output_tokens")
		cached = u.Get("input_tokens_details.cached_tokens")
	}
	if in.Type == gjson.Number {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(int(in.Int())))
	}
	if out.Type == gjson.Number {
		attrs = append(attrs, semconv.GenAIUsageOutputTokens(int(out.Int())))
	}
	if cached.Type == gjson.Number && cached.Int() > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(cached.Int())))
	}
	return attrs
}

// Fail ends the call as failed: err is why (the last try's outcome names its
// error.type).
func (c *Call) Fail(err error) {
	if c == nil || c.ended {
		return
	}
	if c.span != nil && c.span.IsRecording() {
		typ := c.outcome
		if typ == "" {
			typ = "error"
		}
		c.fail(typ, err.Error())
	}
	c.end()
}

func (c *Call) fail(typ, msg string) {
	c.span.SetAttributes(semconv.ErrorTypeKey.String(typ))
	c.span.SetStatus(codes.Error, msg)
}

func (c *Call) end() {
	c.ended = true
	if c.span != nil {
		c.span.End()
	}
}

// Stream reads the bytes of a streamed answer as they are relayed: the events'
// id, model, finish reasons and usage (and, with content on, the text) become the
// call's response attributes when it ends (EndStream).
func (c *Call) Stream(p []byte) {
	if c == nil || c.span == nil || !c.span.IsRecording() {
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
	if c.span != nil && c.span.IsRecording() {
		if s := c.stream; s != nil {
			c.span.SetAttributes(s.attributes(c)...)
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
