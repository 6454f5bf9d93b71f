package telemetry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// span is a span factgate records itself — a request's server span, a call's,
// a try's — rather than through the SDK's tracer: it gathers its attributes in
// one pooled slice that becomes the exported span's as it is, where the SDK
// copies them into its span, de-duplicates them through a map and copies the
// span again into a snapshot when it ends (about 4 KB and a third of what
// tracing cost a relayed request with the encoder of otlp.go). It is sampled by the tracer provider's sampler, takes
// its ids from the same generator, and ends in the same export queue as the
// stages' SDK spans; it is a trace.Span, so a stage's span started under it
// (interceptors.StartSpan) is the SDK's, with it as the parent. Attributes past
// the common case — duplicate keys, more than the count limit, a value length
// limit (OTEL_SPAN_ATTRIBUTE_*), slice or map values — are normalized by the
// SDK itself (normalize).
type span struct {
	embedded.Span
	t         *Telemetry
	sc        trace.SpanContext
	parent    trace.SpanContext
	name      string
	kind      trace.SpanKind
	start     time.Time
	recording bool

	mu     sync.Mutex
	end    time.Time
	ended  bool
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	status sdktrace.Status
	// dropped counts the attributes and events the limits left out.
	droppedAttrs, droppedEvents int
}

// start starts a span of kind named name under the span in ctx at start (now
// when zero), with attrs (a slice the span then owns: one of getAttrs, or nil).
func (t *Telemetry) start(ctx context.Context, name string, kind trace.SpanKind, start time.Time, attrs []attribute.KeyValue) (context.Context, *span) {
	parent := trace.SpanContextFromContext(ctx)
	var tid trace.TraceID
	var sid trace.SpanID
	if parent.IsValid() {
		tid, sid = parent.TraceID(), randomIDs{}.NewSpanID(ctx, parent.TraceID())
	} else {
		tid, sid = randomIDs{}.NewIDs(ctx)
	}
	res := t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid, Name: name, Kind: kind, Attributes: attrs})
	flags := parent.TraceFlags() &^ trace.FlagsSampled
	if res.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
	}
	if start.IsZero() {
		start = time.Now()
	}
	s := &span{
		t:      t,
		sc:     trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: res.Tracestate}),
		parent: parent,
		name:   name,
		kind:   kind,
		start:  start,

		recording: res.Decision != sdktrace.Drop,
	}
	if s.recording {
		s.attrs = attrs
		if len(res.Attributes) > 0 {
			s.attrs = append(s.attrs, res.Attributes...)
		}
	} else {
		putAttrs(attrs)
	}
	return trace.ContextWithSpan(ctx, s), s
}

// SpanContext implements trace.Span.
func (s *span) SpanContext() trace.SpanContext { return s.sc }

// IsRecording implements trace.Span.
func (s *span) IsRecording() bool {
	if !s.recording {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// SetStatus implements trace.Span, as the SDK does: Ok wins, a description is
// kept for Error only.
func (s *span) SetStatus(code codes.Code, description string) {
	if !s.recording {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || code < s.status.Code {
		return
	}
	st := sdktrace.Status{Code: code}
	if code == codes.Error {
		st.Description = description
	}
	s.status = st
}

// SetAttributes implements trace.Span.
func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	if !s.recording || len(kv) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.attrs = s.appendAttrs(kv)
	}
}

// appendAttrs appends kv to the span's attributes, in a pooled slice.
func (s *span) appendAttrs(kv []attribute.KeyValue) []attribute.KeyValue {
	if s.attrs == nil {
		s.attrs = getAttrs()
	}
	return append(s.attrs, kv...)
}

// AddEvent implements trace.Span.
func (s *span) AddEvent(name string, options ...trace.EventOption) {
	if !s.recording {
		return
	}
	cfg := trace.NewEventConfig(options...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.events = append(s.events, sdktrace.Event{Name: name, Attributes: cfg.Attributes(), Time: cfg.Timestamp()})
}

// AddLink implements trace.Span: factgate's spans have no links.
func (s *span) AddLink(trace.Link) {}

// RecordError implements trace.Span, as the SDK does: an exception event.
func (s *span) RecordError(err error, options ...trace.EventOption) {
	if err == nil || !s.recording {
		return
	}
	options = append(options, trace.WithAttributes(
		attribute.String("exception.type", fmt.Sprintf("%T", err)),
		attribute.String("exception.message", err.Error())))
	s.AddEvent("exception", options...)
}

// SetName implements trace.Span.
func (s *span) SetName(name string) {
	if !s.recording {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.name = name
	}
}

// TracerProvider implements trace.Span: the SDK's, for the spans of stages.
func (s *span) TracerProvider() trace.TracerProvider { return s.t.provider }

// End implements trace.Span (trace.WithTimestamp is the option it reads).
func (s *span) End(options ...trace.SpanEndOption) {
	var at time.Time
	if len(options) > 0 {
		cfg := trace.NewSpanEndConfig(options...)
		at = cfg.Timestamp()
	}
	s.finish(at, nil)
}

// finish ends the span at at (now when zero) with attrs added (a pooled slice
// the span takes over; nil for none), and queues it for export when sampled.
func (s *span) finish(at time.Time, attrs []attribute.KeyValue) {
	if at.IsZero() {
		at = s.start.Add(time.Since(s.start)) // monotonic, as the SDK's
	}
	if !s.recording {
		putAttrs(attrs)
		return
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		putAttrs(attrs)
		return
	}
	s.ended, s.end = true, at
	switch {
	case len(attrs) == 0:
		putAttrs(attrs)
	case len(s.attrs) == 0:
		putAttrs(s.attrs)
		s.attrs = attrs
	default:
		s.attrs = append(s.attrs, attrs...)
		putAttrs(attrs)
	}
	s.mu.Unlock()
	if !s.sc.IsSampled() {
		s.release()
		return
	}
	s.normalize()
	s.t.queue.add(s)
}

// release gives the span's attributes back to the pool, once it is exported or
// dropped.
func (s *span) release() {
	putAttrs(s.attrs)
	s.attrs = nil
}

// normalize applies the SDK's span limits and attribute rules to the span's
// attributes and events. The common case — unique keys, within the count limit,
// no value length limit, no slice or map value — is checked here and left as it
// is; any other goes through an SDK span of a provider of the same limits, so
// that the result is the SDK's own.
func (s *span) normalize() {
	lim := s.t.limits
	if n := lim.EventCountLimit; n >= 0 && len(s.events) > n {
		s.droppedEvents = len(s.events) - n
		s.events = s.events[len(s.events)-n:] // the SDK keeps the newest
	}
	for i := range s.events {
		if n := lim.AttributePerEventCountLimit; n >= 0 && len(s.events[i].Attributes) > n {
			s.events[i].DroppedAttributeCount = len(s.events[i].Attributes) - n
			s.events[i].Attributes = s.events[i].Attributes[:n]
		}
	}
	if commonAttrs(s.attrs, lim) {
		return
	}
	_, sdkSpan := s.t.normalizer.Start(context.Background(), "")
	sdkSpan.SetAttributes(s.attrs...)
	ro := sdkSpan.(sdktrace.ReadOnlySpan)
	attrs, dropped := ro.Attributes(), ro.DroppedAttributes()
	sdkSpan.End()
	putAttrs(s.attrs)
	s.attrs, s.droppedAttrs = attrs, dropped
}

// commonAttrs reports whether attrs are as the SDK would keep them: unique
// valid keys, within the count limit, with no length limit, no slice or map.
func commonAttrs(attrs []attribute.KeyValue, lim sdktrace.SpanLimits) bool {
	if lim.AttributeValueLengthLimit >= 0 || (lim.AttributeCountLimit >= 0 && len(attrs) > lim.AttributeCountLimit) {
		return false
	}
	for i, a := range attrs {
		if !a.Valid() {
			return false
		}
		switch a.Value.Type() {
		case attribute.SLICE, attribute.MAP:
			return false
		}
		for _, b := range attrs[:i] {
			if a.Key == b.Key {
				return false
			}
		}
	}
	return true
}

// The span's data, as the encoder and the SDK's exporters read it (the
// methods of sdktrace.ReadOnlySpan that spanData names).

func (s *span) Name() string                                { return s.name }
func (s *span) Parent() trace.SpanContext                   { return s.parent }
func (s *span) SpanKind() trace.SpanKind                    { return s.kind }
func (s *span) StartTime() time.Time                        { return s.start }
func (s *span) EndTime() time.Time                          { return s.end }
func (s *span) Attributes() []attribute.KeyValue            { return s.attrs }
func (s *span) Links() []sdktrace.Link                      { return nil }
func (s *span) Events() []sdktrace.Event                    { return s.events }
func (s *span) Status() sdktrace.Status                     { return s.status }
func (s *span) InstrumentationScope() instrumentation.Scope { return s.t.scope }
func (s *span) Resource() *resource.Resource                { return s.t.resource }
func (s *span) DroppedAttributes() int                      { return s.droppedAttrs }
func (s *span) DroppedLinks() int                           { return 0 }
func (s *span) DroppedEvents() int                          { return s.droppedEvents }

// spanData is what the encoder reads of a span: an SDK span
// (sdktrace.ReadOnlySpan) or one of factgate's own.
type spanData interface {
	Name() string
	SpanContext() trace.SpanContext
	Parent() trace.SpanContext
	SpanKind() trace.SpanKind
	StartTime() time.Time
	EndTime() time.Time
	Attributes() []attribute.KeyValue
	Links() []sdktrace.Link
	Events() []sdktrace.Event
	Status() sdktrace.Status
	InstrumentationScope() instrumentation.Scope
	Resource() *resource.Resource
	DroppedAttributes() int
	DroppedLinks() int
	DroppedEvents() int
}

// readOnly is s as an SDK span, for an exporter other than spanExporter
// (http/json, the tests' in-memory exporter).
func readOnly(s spanData) sdktrace.ReadOnlySpan {
	if ro, ok := s.(sdktrace.ReadOnlySpan); ok {
		return ro
	}
	return spanStub(s).Snapshot()
}

func spanStub(s spanData) tracetest.SpanStub {
	return tracetest.SpanStub{
		Name:                 s.Name(),
		SpanContext:          s.SpanContext(),
		Parent:               s.Parent(),
		SpanKind:             s.SpanKind(),
		StartTime:            s.StartTime(),
		EndTime:              s.EndTime(),
		Attributes:           s.Attributes(),
		Events:               s.Events(),
		Links:                s.Links(),
		Status:               s.Status(),
		DroppedAttributes:    s.DroppedAttributes(),
		DroppedEvents:        s.DroppedEvents(),
		DroppedLinks:         s.DroppedLinks(),
		Resource:             s.Resource(),
		InstrumentationScope: s.InstrumentationScope(),
	}
}

var (
	_ trace.Span = (*span)(nil)
	_ spanData   = (*span)(nil)
	_ spanData   = sdktrace.ReadOnlySpan(nil)
)
