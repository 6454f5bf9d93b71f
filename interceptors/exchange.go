package interceptors

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.opentelemetry.io/otel/attribute"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// HeaderReader reads one request header by name (case-insensitive). fasthttp's
// RequestHeader satisfies it.
type HeaderReader interface {
	Peek(key string) []byte
}

// Exchange carries one chat completion through a route's chain.
//
// The proxy creates it; interceptors read and edit it. It is used by one request
// at a time; interceptors that start goroutines must not touch it after their
// phase returns, except through the Trace, which is safe for concurrent use, and
// Release, to end a Hold on its buffers.
type Exchange struct {
	// Route is the name of the route the request matched.
	Route string
	// Model is the model the client asked for (the route alias, before rewriting).
	Model string
	// Original is the client's request body as received. The exchange owns it; it
	// is never edited.
	Original []byte
	// Body is the outgoing request body. Request phases edit it with sjson, which
	// returns a new slice, and replace it; unknown fields must survive
	// byte-for-byte. Body may share memory with Original or be a Buffer: never
	// write into it.
	Body []byte
	// Header reads the client's request headers. Nil means no headers.
	Header HeaderReader
	// ClientKey names the client key that authenticated the request ("" in
	// passthrough auth mode).
	ClientKey string
	// Stream reports whether the client asked for a stream (`stream: true`).
	Stream bool
	// Upstream makes further calls to the route's upstream. Nil when the exchange is
	// not running inside a proxy (offline checks).
	Upstream Upstream
	// UpstreamNamed returns a caller for another configured upstream (an LLM-backed
	// validator's own model profile), with the client's credentials as for Upstream.
	// Nil outside a proxy.
	UpstreamNamed func(name string) (Upstream, bool)

	// Response is the upstream's answer once the call returned (any status), or the
	// response a request phase short-circuited with. Response phases may replace it.
	Response *Response
	// UpstreamErr is the transport failure of the first upstream call (nil when a
	// response arrived). Response phases see it and may leave it as is.
	UpstreamErr error

	// Overrides are the A/B variant's settings; later interceptors honour them.
	Overrides Overrides
	// Injected is the prompt a request phase put into the request on the client's
	// behalf (the inject stage's knowledge, contract and rules, without the
	// client's own texts merged after them); "" when nothing was injected. The
	// proxy keeps it from the client: it is never echoed back, and an upstream
	// error that quotes the request is passed on without it.
	Injected string
	// ContractInjected reports that the inject stage put the pack's contract into
	// the request on the client's behalf (the client's own system messages did
	// not already ask for the claims block): only then is the claims block
	// factgate's to strip from the answer (strip_claims: auto).
	ContractInjected bool
	// Validators are the answer validators of the route, in the order they run
	// (AddValidator appends one).
	Validators []AnswerValidator
	// Issues are the issues of the current answer (the first draft after
	// validation; the final answer after revision), over every validated choice.
	Issues []Issue
	// DraftIssues are the issues of the first draft, over every validated choice.
	DraftIssues []Issue
	// DeliveredIssues are the issues of the answer as the client receives it —
	// after the revision step's downgrade — over every validated choice; the
	// draft's until a revision step sets them.
	DeliveredIssues []Issue
	// Choices are the answer's choices as validation saw them, one per choice of
	// the response, in order; nil until a validating stage checked the draft. Each
	// keeps its own issues; Issues and DraftIssues are their concatenation.
	Choices []Choice
	// Revisions counts the hidden revision and repair calls made.
	Revisions int
	// Usage is the sum of usage over every upstream call made for the request.
	Usage Usage
	// Trace records what happened; the proxy stores it when the route keeps traces.
	Trace *Trace
	// ResponseHeaders are added to the client's response ("X-Factgate-..." headers).
	ResponseHeaders [][2]string

	// values holds SetValue's first entries in place: a request's chain stores
	// two or three (the request context, the facts stage's job, ...), and a map
	// for them cost two allocations per request. More spill into more.
	values [exchangeValues]exchangeValue
	more   map[any]any
	// headers backs ResponseHeaders for the first headers a chain adds, so that
	// AddHeader does not allocate for them.
	headers [2][2]string
	buffers []*[]byte // from Buffer, pooled again by Release
	// bufferSlots backs buffers for a request's first few (the client's body, the
	// context stage's decoded heads, the injected body, the answer): growing the
	// slice from one cost three allocations per request.
	bufferSlots [4]*[]byte
	holds       atomic.Int32 // goroutines holding the buffers besides the proxy (Hold)

	// validators backs Validators for the first ones AddValidator adds, and
	// choice backs Choices for an answer of one choice (NewChoices): each cost
	// an allocation per validated request.
	validators [2]AnswerValidator
	choice     [1]Choice
}

// Choice is one choice of a checked answer.
type Choice struct {
	// Index is the choice's position in the response's choices.
	Index int
	// Skipped says why the choice was not validated ("" when it was): an answer
	// that calls tools is returned as the upstream sent it.
	Skipped string
	// DraftIssues are the issues of the choice's first answer; Issues are those of
	// the answer returned for it (the draft's until a revision replaces it), as
	// validated; Delivered are those of the answer as sent, after the downgrade
	// (Issues until a revision step sets them).
	DraftIssues, Issues, Delivered []Issue
}

// SkipToolCalls is Choice.Skipped for a choice that answers with tool calls.
const SkipToolCalls = "tool_calls"

// Validated reports whether at least one choice was validated.
func (ex *Exchange) Validated() bool {
	for _, c := range ex.Choices {
		if c.Skipped == "" {
			return true
		}
	}
	return false
}

// CollectIssues sets Issues, DraftIssues and DeliveredIssues to the concatenation
// of the validated choices' issues, in choice order.
func (ex *Exchange) CollectIssues() {
	var draft, final, delivered []Issue
	for _, c := range ex.Choices {
		draft = append(draft, c.DraftIssues...)
		final = append(final, c.Issues...)
		delivered = append(delivered, c.Delivered...)
	}
	ex.DraftIssues, ex.Issues, ex.DeliveredIssues = draft, final, delivered
}

// Overrides are per-request settings chosen by an A/B variant. Zero values mean
// "the route's own setting".
type Overrides struct {
	// Variant is the assigned variant's name ("" when the route has no experiment).
	Variant string
	// Experiment is the experiment's name.
	Experiment string
	// KnowledgeSet replaces the resolved knowledge set.
	KnowledgeSet string
	// CustomPrompt, when non-nil, replaces the rendered knowledge.
	CustomPrompt *string
	// AdditionalRules, when non-nil, replaces the route's additional rules.
	AdditionalRules *string
	// Validate, when non-nil, turns validation on or off.
	Validate *bool
	// MaxRevisions, when non-nil, replaces the route's max_revisions.
	MaxRevisions *int
	// Threshold, when non-nil, replaces the revision threshold.
	Threshold *Severity
	// Notice, when non-nil, replaces the route's revise.notice ("none", "append",
	// "header").
	Notice *string
}

// MaxRevisionsLimit is the highest max_revisions a route's revise block or an A/B
// variant accepts: more revisions than this do not converge, they only cost.
const MaxRevisionsLimit = 10

// exchangeValues is how many SetValue entries an Exchange holds without a map.
const exchangeValues = 4

// exchangeValue is one SetValue entry. Slots fill in order and are never
// freed, so the first one with a nil key ends the entries (keys are values of
// unexported types, never nil).
type exchangeValue struct{ key, v any }

// SetValue stores a per-request value under key (use an unexported key type).
func (ex *Exchange) SetValue(key, v any) {
	for i := range ex.values {
		switch ex.values[i].key {
		case key:
			ex.values[i].v = v
			return
		case nil:
			ex.values[i] = exchangeValue{key, v}
			return
		}
	}
	if ex.more == nil {
		ex.more = make(map[any]any, 4)
	}
	ex.more[key] = v
}

// Value returns the per-request value stored under key, or nil.
func (ex *Exchange) Value(key any) any {
	for i := range ex.values {
		switch ex.values[i].key {
		case key:
			return ex.values[i].v
		case nil:
			return nil
		}
	}
	return ex.more[key]
}

// AddValidator appends v to Validators.
func (ex *Exchange) AddValidator(v AnswerValidator) {
	if ex.Validators == nil {
		ex.Validators = ex.validators[:0]
	}
	ex.Validators = append(ex.Validators, v)
}

// NewChoices sets Choices to n zero choices and returns them.
func (ex *Exchange) NewChoices(n int) []Choice {
	if n <= len(ex.choice) {
		ex.choice = [len(ex.choice)]Choice{}
		ex.Choices = ex.choice[:n:n]
	} else {
		ex.Choices = make([]Choice, n)
	}
	return ex.Choices
}

// IssueCountsHeader renders the issue counts of the first draft, of the final
// answer as validated and of the answer as delivered as the X-Factgate-Issues
// header says them: "draft=C1,W2;final=C1;delivered=0".
func IssueCountsHeader(draft, final, delivered SeverityCounts) string {
	if draft == (SeverityCounts{}) && final == draft && delivered == draft {
		return noIssuesHeader // a clean answer's, the usual one, not built each time
	}
	return "draft=" + draft.String() + ";final=" + final.String() + ";delivered=" + delivered.String()
}

const noIssuesHeader = "draft=0;final=0;delivered=0"

// AddHeader adds a response header for the client.
func (ex *Exchange) AddHeader(name, value string) {
	if ex.ResponseHeaders == nil {
		ex.ResponseHeaders = ex.headers[:0]
	}
	ex.ResponseHeaders = append(ex.ResponseHeaders, [2]string{name, value})
}

// SetHeader sets a response header for the client, replacing an earlier one.
func (ex *Exchange) SetHeader(name, value string) {
	for i := range ex.ResponseHeaders {
		if ex.ResponseHeaders[i][0] == name {
			ex.ResponseHeaders[i][1] = value
			return
		}
	}
	ex.AddHeader(name, value)
}

// ValidateAnswer runs the registered validators on content: deterministic ones first,
// then LLM-backed ones, which are skipped when a Fatal issue exists. Errors of
// individual validators are returned beside the issues; the caller decides what a
// failed validator means for the request. With tracing on it is the span
// factgate.validate, and the judge calls of LLM-backed validators are under it.
func (ex *Exchange) ValidateAnswer(ctx context.Context, content string) ([]Issue, []error) {
	ctx, span := StartSpan(ctx, "factgate.validate")
	issues, errs := ex.validateAnswer(ctx, content)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("factgate.issues", CountSeverities(issues).String()))
		if len(errs) > 0 {
			span.SetAttributes(attribute.Bool("factgate.validation_incomplete", true))
		}
	}
	span.End()
	return issues, errs
}

func (ex *Exchange) validateAnswer(ctx context.Context, content string) ([]Issue, []error) {
	issues, errs := ex.CheckAnswer(ctx, content)
	if m, ok := MaxSeverity(issues); ok && m == Fatal {
		return issues, errs
	}
	for _, v := range ex.Validators {
		if !v.LLMBacked() {
			continue
		}
		is, err := v.ValidateAnswer(ctx, ex, content)
		issues = append(issues, is...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return issues, errs
}

// CheckAnswer runs only the deterministic validators on content: the checks that
// cost no call, for an answer factgate edited itself (a downgraded claims block).
func (ex *Exchange) CheckAnswer(ctx context.Context, content string) ([]Issue, []error) {
	var issues []Issue
	var errs []error
	for _, v := range ex.Validators {
		if v.LLMBacked() {
			continue
		}
		is, err := v.ValidateAnswer(ctx, ex, content)
		issues = append(issues, is...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return issues, errs
}

// Response is an upstream answer held by the proxy.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the upstream's end-to-end response headers, in order.
	Header [][2]string
	// Body is the complete response body.
	Body []byte
	// Duration is how long the upstream call took.
	Duration time.Duration

	// content caches the last ChoiceContent read, for the Body it was read from.
	content contentCache
	// answer is where the choices and the usage are in Body, for the Body it was
	// read from. It makes a Response unfit to copy by value once read.
	answer answerSpans
}

// contentCache is one decoded choice content and the body it was read from (its
// first byte and length: a Body replaced by an edit is a new slice).
//
// Identity key: a slice's pointer and length, which pin its array (docs/architecture.md, Lifetimes).
type contentCache struct {
	body  *byte
	n     int
	i     int
	value string
}

// view returns the body as a string without copying, for gjson reads whose
// results are not kept (counts, types) or are copied before they are.
//
// unsafe: a string over b without a copy, read only while b is unchanged (docs/architecture.md, Lifetimes).
func (r *Response) view() string {
	if len(r.Body) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(r.Body), len(r.Body))
}

// OK reports a 2xx status.
func (r *Response) OK() bool { return r != nil && r.Status >= 200 && r.Status < 300 }

// ContentType returns the Content-Type header, or "".
func (r *Response) ContentType() string {
	for _, h := range r.Header {
		if strings.EqualFold(h[0], "Content-Type") {
			return h[1]
		}
	}
	return ""
}

// HasMessage reports that a chat.completion body has at least one choice carrying a
// message object. A 2xx answer without one ({}, "choices": []) answers nothing:
// it is the upstream's failure, not an answer to check, revise or return.
func (r *Response) HasMessage() bool {
	if a := r.spans(); a.fast {
		for i := range a.choices {
			if m := a.choices[i].message.raw; m != "" && m[0] == '{' {
				return true
			}
		}
		return false
	}
	found := false
	gjson.Get(r.view(), "choices").ForEach(func(_, choice gjson.Result) bool {
		found = choice.Get("message").IsObject()
		return !found
	})
	return found
}

// Content returns the first choice's message content of a chat.completion body.
func (r *Response) Content() string { return r.ChoiceContent(0) }

// SetContent replaces the first choice's message content, editing the body in place.
func (r *Response) SetContent(content string) error { return r.SetChoiceContent(0, content) }

// NumChoices returns the number of choices of a chat.completion body (0 when it
// has no choices array).
func (r *Response) NumChoices() int {
	if a := r.spans(); a.fast {
		return len(a.choices)
	}
	n := 0
	gjson.Get(r.view(), "choices").ForEach(func(_, _ gjson.Result) bool { n++; return true })
	return n
}

// ChoiceContent returns the message content of the choice at position i ("" when
// it is null or absent). The string is the caller's to keep: it never shares the
// body's memory. The last one read is cached until Body changes, as validation and
// revision both read the draft's.
func (r *Response) ChoiceContent(i int) string {
	if c := &r.content; c.n == len(r.Body) && c.body == unsafe.SliceData(r.Body) && c.i == i && c.body != nil {
		return c.value
	}
	s, ok := r.stringContent(i)
	if !ok {
		v := r.ChoiceField(i, "message.content")
		s = v.String()
		if aliases(s, r.Body) {
			// A string without escapes, or the raw JSON of a content that is not
			// a string (an array of parts): a slice of the body.
			s = strings.Clone(s)
		}
	}
	r.content = contentCache{body: unsafe.SliceData(r.Body), n: len(r.Body), i: i, value: s}
	return s
}

// stringContent decodes the content of the choice at position i from its span
// when it is a string (the common case): one copy, escapes decoded a run at a
// time, where gjson decodes byte by byte. ok is false when the walk does not serve
// the body or the content is not a string.
func (r *Response) stringContent(i int) (string, bool) {
	a := r.spans()
	if !a.fast {
		return "", false
	}
	c := a.choice(i)
	if c == nil || !c.msgFields {
		return "", false
	}
	raw := c.content.raw
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if c.decoded {
		if aliases(c.text, r.Body) {
			return strings.Clone(c.text), true
		}
		return c.text, true
	}
	inner := raw[1 : len(raw)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		return strings.Clone(inner), true
	}
	return rawjson.Unescape(inner, -1), true
}

// ChoiceField reads path inside the choice at position i ("message.content",
// "finish_reason") without copying the body: the result's Raw — and its Str,
// unless the string had escapes — share the body's memory, so they must be
// copied (strings.Clone) to be kept beyond the next edit of Body.
//
// Lifetime: aliases Body until Body is replaced (docs/architecture.md, Lifetimes).
func (r *Response) ChoiceField(i int, path string) gjson.Result {
	if a := r.spans(); a.fast && plainPath(path) {
		c := a.choice(i)
		switch {
		case c == nil:
			return gjson.Result{}
		case path == "message":
			return c.message.result()
		case c.msgFields && path == "message.content":
			return c.content.result()
		case c.msgFields && path == "message.tool_calls":
			return c.toolCalls.result()
		case c.msgFields && path == "message.function_call":
			return c.funcCall.result()
		}
		return get(c.raw, c.off, path)
	}
	return r.choiceFieldSlow(i, path)
}

// choiceFieldSlow is ChoiceField by one gjson.Get over the whole body.
func (r *Response) choiceFieldSlow(i int, path string) gjson.Result {
	var b [48]byte
	p := append(b[:0], "choices."...)
	p = strconv.AppendInt(p, int64(i), 10)
	p = append(p, '.')
	p = append(p, path...)
	return gjson.Get(r.view(), string(p))
}

// aliases reports whether s points into b.
//
// unsafe: compares addresses only, reads no memory (docs/architecture.md, Lifetimes).
func aliases(s string, b []byte) bool {
	if len(s) == 0 || len(b) == 0 {
		return false
	}
	p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p < start+uintptr(len(b))
}

// SetChoiceContent replaces the message content of the choice at position i,
// editing the body in place.
func (r *Response) SetChoiceContent(i int, content string) error {
	if off, n, ok := r.contentValue(i); ok {
		// The bytes sjson.SetBytes writes, without its decoding of the old
		// content on the way to it: the value replaced, the rest as it was.
		out := make([]byte, 0, len(r.Body)-n+len(content)+len(content)/8+2)
		out = append(out, r.Body[:off]...)
		out = appendJSONString(out, content)
		out = append(out, r.Body[off+n:]...)
		a := &r.answer
		r.Body = out
		if a.fast {
			// A JSON string in place of a value keeps the body valid, and its
			// usage (outside the choices) as it was.
			*a = answerSpans{body: unsafe.SliceData(out), n: len(out), valid: true, choices: a.choices[:0],
				usageRead: a.usageRead, usageValue: a.usageValue}
		}
		return nil
	}
	b, err := sjson.SetBytes(r.Body, "choices."+strconv.Itoa(i)+".message.content", content)
	if err != nil {
		return err
	}
	r.Body = b
	return nil
}

// ChoiceContentNull reports whether the message content of the choice at position
// i is null or absent (a refusal, a call of tools), without decoding it.
func (r *Response) ChoiceContentNull(i int) bool {
	off, n, ok := r.contentValue(i)
	return !ok || string(r.Body[off:off+n]) == "null"
}

// contentValue locates the message content of the choice at position i in the
// body: its offset and length. ok is false when the choice, its message or the
// content is missing. With duplicate keys the first one counts, as in gjson and
// sjson.
func (r *Response) contentValue(i int) (off, n int, ok bool) {
	if a := r.spans(); a.fast {
		c := a.choice(i)
		if c == nil {
			return 0, 0, false
		}
		if c.msgFields {
			return c.content.off, len(c.content.raw), c.content.raw != ""
		}
	}
	msg := r.ChoiceField(i, "message") // an object is not decoded: Raw only
	if !msg.IsObject() || msg.Index <= 0 {
		return 0, 0, false
	}
	rawjson.EachMember(msg.Raw, func(m rawjson.Member) bool {
		if rawjson.KeyIs(m.Key, "content") {
			off, n, ok = msg.Index+m.Off, len(m.Raw), true
			return false
		}
		return true
	})
	return off, n, ok
}

// appendJSONString appends s as a JSON string exactly as sjson encodes a string
// value: as it is between quotes when it is printable ASCII without a quote or a
// backslash, else as encoding/json marshals it.
func appendJSONString(dst []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	return appendString(dst, s) // encoding/json's encoding, written without its encoder
}

// SetChoiceField sets value (encoded as sjson does) at path inside the choice at
// position i ("finish_reason").
func (r *Response) SetChoiceField(i int, path string, value any) error {
	b, err := sjson.SetBytes(r.Body, "choices."+strconv.Itoa(i)+"."+path, value)
	if err != nil {
		return err
	}
	r.Body = b
	return nil
}

// HasToolCalls reports whether the choice at position i carries tool calls (a
// non-empty message.tool_calls array, or the legacy message.function_call).
func (r *Response) HasToolCalls(i int) bool {
	if a := r.spans(); a.fast {
		if c := a.choice(i); c != nil && c.msgFields {
			if tc := c.toolCalls.result(); tc.IsArray() && tc.Get("#").Int() > 0 {
				return true
			}
			return c.funcCall.result().IsObject()
		}
	}
	msg := r.ChoiceField(i, "message")
	if tc := msg.Get("tool_calls"); tc.IsArray() && tc.Get("#").Int() > 0 {
		return true
	}
	return msg.Get("function_call").IsObject()
}

// Usage reads the body's usage object. It is read once per Body and kept.
func (r *Response) Usage() Usage {
	if len(r.Body) == 0 {
		return Usage{}
	}
	if a := &r.answer; a.usageRead && a.n == len(r.Body) && a.body == unsafe.SliceData(r.Body) {
		return a.usageValue
	}
	a := r.spans()
	if a.fast {
		a.usageValue = parseUsage(a.usage.result())
	} else {
		a.usageValue = parseUsage(gjson.Get(r.view(), "usage"))
	}
	a.usageRead = true
	return a.usageValue
}

// Usage is the token usage of one or more upstream calls.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ParseUsage reads the "usage" object of a chat completion body (zero when absent).
func ParseUsage(body []byte) Usage {
	return parseUsage(gjson.GetBytes(body, "usage"))
}

func parseUsage(u gjson.Result) Usage {
	if !u.Exists() {
		return Usage{}
	}
	return Usage{
		PromptTokens:     int(u.Get("prompt_tokens").Int()),
		CompletionTokens: int(u.Get("completion_tokens").Int()),
		TotalTokens:      int(u.Get("total_tokens").Int()),
	}
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.PromptTokens + o.PromptTokens, u.CompletionTokens + o.CompletionTokens, u.TotalTokens + o.TotalTokens}
}

// JSON renders the usage object.
func (u Usage) JSON() []byte {
	b, _ := json.Marshal(u)
	return b
}
