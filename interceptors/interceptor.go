// Package interceptors holds the types shared by the proxy and every interceptor:
// the interceptor interfaces, the Stage each interceptor package describes itself
// with, the Exchange one chat completion travels in, validation issues and their
// severities, and the per-request trace. It holds no behaviour of its own; each
// interceptor lives in its own package below this one.
//
// A route's chain is built once at start-up (first = outermost). Request phases run
// in chain order and may edit the outgoing request or short-circuit it; response
// phases run in reverse order, and only for interceptors whose request phase ran.
package interceptors

import "context"

// Interceptor is one step of a route's chain. It implements RequestPhase,
// ResponsePhase, or both.
type Interceptor interface {
	// Name identifies the interceptor in traces, logs and metrics.
	Name() string
}

// RequestPhase runs before the upstream call.
//
// It may edit ex.Body (the outgoing request, edited with sjson and replaced) or
// short-circuit the call by setting ex.Response, in which case no later request
// phase and no upstream call run. A returned error ends the request with that error
// (an *Error renders with its own status) unless the interceptor is fail-open, in
// which case it records the failure in the trace and returns nil.
type RequestPhase interface {
	Interceptor
	OnRequest(ctx context.Context, ex *Exchange) error
}

// ResponsePhase runs after the upstream call, in reverse chain order. It sees the
// complete buffered response in ex.Response (or the upstream failure in ex.UpstreamErr)
// and may replace it. A route with at least one response phase has its upstream
// answer buffered, even for clients that asked for a stream — unless no response
// phase holds the request's answer (AnswerHolder).
type ResponsePhase interface {
	Interceptor
	OnResponse(ctx context.Context, ex *Exchange) error
}

// AnswerHolder is implemented by a ResponsePhase that needs the whole answer of
// some requests only (validation and the hidden revision need the answers the
// route's pack is about). After the request phases, the proxy asks every
// interceptor whose request phase ran; when none holds the answer of a
// streaming request, the upstream streams it and the client gets it live, as on
// a route without interceptors. The response phases then run once the stream has
// ended, with ex.Response carrying the status, headers and duration but no body,
// and ex.Usage the stream's usage. A ResponsePhase that does not implement
// AnswerHolder holds every answer.
type AnswerHolder interface {
	ResponsePhase
	// HoldsAnswer reports whether the response phase needs ex's whole answer.
	HoldsAnswer(ex *Exchange) bool
}

// FailurePhase is implemented by interceptors that must see a request a phase
// inside them ended with an error (an A/B experiment counts it). OnFailure runs in
// reverse chain order for the interceptors whose request phase ran, outside the
// one that failed; the response phases of those interceptors do not run. It must
// not change the error the client gets.
type FailurePhase interface {
	Interceptor
	OnFailure(ctx context.Context, ex *Exchange, err *Error)
}

// AnswerValidator checks the content of one answer. Validators are registered on the
// Exchange by the request phases of the validating interceptors, so that a later
// response phase (the hidden revision) can validate every attempt the same way the
// first draft was validated.
type AnswerValidator interface {
	// Name identifies the validator in traces.
	Name() string
	// LLMBacked reports whether the validator makes a paid model call. LLM-backed
	// validators run after the deterministic ones and only when no Fatal issue exists.
	LLMBacked() bool
	// ValidateAnswer returns the issues of content. It must not modify content. An
	// error means the validator could not run; the caller decides what that means.
	ValidateAnswer(ctx context.Context, ex *Exchange, content string) ([]Issue, error)
}

// Upstream makes further calls to the route's upstream on behalf of a response
// phase (the hidden revision, repairs, LLM-backed validators).
type Upstream interface {
	// Complete sends a non-streaming chat completion request body and returns the
	// upstream's response. A non-2xx status is returned as a Response, not an error;
	// err reports transport failures, timeouts and cancellation. In a proxy the
	// Response's Body is the upstream's buffer, valid until the request is
	// finished (as Exchange.Buffer): copy what is kept beyond it.
	Complete(ctx context.Context, body []byte) (*Response, error)
}
