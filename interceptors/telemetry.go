package interceptors

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// OpenTelemetry: with tracing on (the proxy's telemetry block), the context of
// every phase carries the request's span, and a stage may put spans of its own
// under it with StartSpan, through the OpenTelemetry trace API. With tracing off,
// or a request its sampler left out, StartSpan costs one context lookup and
// returns ctx as it is: a stage never checks whether tracing is on.

// tracerName is the instrumentation scope of the stages' spans.
const tracerName = "github.com/factgate/factgate/interceptors"

// noSpan is the span StartSpan returns when the request's span records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// StartSpan starts a span named name under the span in ctx, when that one
// records; otherwise it returns ctx and a span that does nothing. The caller
// ends the span.
func StartSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noSpan
	}
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, name)
}

// SpanAttributes sets attributes on the span in ctx (the request's, or a stage's
// own) when it records.
func SpanAttributes(ctx context.Context, attrs ...attribute.KeyValue) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrs...)
	}
}

// Recording reports whether the span in ctx records: a stage computes an
// attribute that costs something only then.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// The kinds of hidden call a stage makes through the Exchange's Upstream
// (factgate.call.kind on the call's span). The draft is the proxy's own call.
const (
	CallKindDraft    = KindDraft
	CallKindRevision = KindRevision
	CallKindRepair   = KindRepair
	CallKindJudge    = "judge"
)

type callKindKey struct{}

// WithCallKind marks ctx as the context of a hidden upstream call of kind
// (CallKindRevision, CallKindJudge, …) for the call's span. ctx is returned as it
// is when the request's span records nothing.
func WithCallKind(ctx context.Context, kind string) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	return context.WithValue(ctx, callKindKey{}, kind)
}

// CallKind is the kind WithCallKind put in ctx; "" when none.
func CallKind(ctx context.Context) string {
	k, _ := ctx.Value(callKindKey{}).(string)
	return k
}
