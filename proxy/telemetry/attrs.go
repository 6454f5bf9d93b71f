package telemetry

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
)

// factgate's own attributes, all under "factgate." (docs/observability.md lists
// them with the GenAI conventions' ones). The stages' spans set theirs through
// the interceptors package (interceptors/telemetry.go).
const (
	// The server span: what the request's chain did.
	attrRoute                = attribute.Key("factgate.route")
	attrModel                = attribute.Key("factgate.request.model") // the model the client asked for
	attrUpstream             = attribute.Key("factgate.upstream")      // the upstream whose answer the client got
	attrPack                 = attribute.Key("factgate.pack")
	attrKnowledgeSet         = attribute.Key("factgate.knowledge_set")
	attrVariant              = attribute.Key("factgate.variant")
	attrClientKey            = attribute.Key("factgate.client_key") // the client key's name, never the key
	attrIssuesDraft          = attribute.Key("factgate.issues.draft")
	attrIssuesFinal          = attribute.Key("factgate.issues.final")
	attrIssuesDelivered      = attribute.Key("factgate.issues.delivered")
	attrRevisions            = attribute.Key("factgate.revisions")
	attrOutcome              = attribute.Key("factgate.outcome")
	attrDowngrades           = attribute.Key("factgate.downgrades")
	attrValidationIncomplete = attribute.Key("factgate.validation_incomplete")
	attrNotice               = attribute.Key("factgate.notice")
	attrInputTokens          = attribute.Key("factgate.usage.input_tokens") // over every call of the request
	attrOutputTokens         = attribute.Key("factgate.usage.output_tokens")
	attrTraceID              = attribute.Key("factgate.trace_id") // X-Factgate-Trace-Id
	attrError                = attribute.Key("factgate.error")    // the error code the client got

	// A call span (gen_ai.*): which call of the request it is.
	attrCallKind = attribute.Key("factgate.call.kind") // relay, draft, revision, repair, judge

	// A try span: which upstream, which key.
	attrTryUpstream = attribute.Key("factgate.upstream.name")
	attrTryKey      = attribute.Key("factgate.upstream.key_name") // the key's environment variable
	attrTryOutcome  = attribute.Key("factgate.upstream.outcome")
	attrTryWait     = attribute.Key("factgate.upstream.wait_ms")
	attrTryFallback = attribute.Key("factgate.upstream.fallback")
)

// spanAttrs is the room a span's attributes are gathered in before they are set
// on the span in one call.
const spanAttrs = 32

// attrPool holds the slices spans' attributes are gathered in. The SDK copies
// attributes when they are set (SetAttributes), so a slice is free again once
// they are: a traced request makes none of its own.
var attrPool = sync.Pool{New: func() any { return new([spanAttrs]attribute.KeyValue) }}

// getAttrs is an empty slice from the pool.
func getAttrs() []attribute.KeyValue { return attrPool.Get().(*[spanAttrs]attribute.KeyValue)[:0] }

// putAttrs gives a back to the pool, when it is one of the pool's.
func putAttrs(a []attribute.KeyValue) {
	if cap(a) != spanAttrs {
		return // grown past the pool's size, or made elsewhere
	}
	p := (*[spanAttrs]attribute.KeyValue)(a[:spanAttrs])
	clear(p[:]) // the strings of the last request are not kept alive
	attrPool.Put(p)
}
