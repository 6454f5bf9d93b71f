package telemetry

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// spanExporter is the OTLP exporter of the protobuf protocols (http/protobuf and
// grpc): it encodes a batch of spans straight into OTLP protobuf bytes and hands
// them to the OpenTelemetry OTLP client (otlptracehttp's or otlptracegrpc's),
// which sends them as it would the official exporter's: the same endpoint,
// headers, compression, TLS, timeout and retries, read from the same OTEL_*
// variables.
//
// The official exporter (otlptrace.Exporter) first turns every span, attribute
// and value into a protobuf struct of its own — three allocations an attribute —
// and then marshals them by reflection: about 40% of what tracing cost a relayed
// request, and most of its garbage. Here each ResourceSpans is a
// message whose content is carried as its unknown fields, which proto.Marshal
// writes out as they are: the bytes on the wire are the official exporter's
// (TestSpanEncoderMatchesOTLPExporter compares them).
//
// http/json keeps the official exporter: protojson does not write unknown
// fields.
type spanExporter struct {
	client otlptrace.Client

	mu   sync.Mutex
	enc  spanEncoder
	msgs []*tracepb.ResourceSpans
	stop sync.Once
}

// newSpanExporter starts client and exports through it.
func newSpanExporter(ctx context.Context, client otlptrace.Client) (*spanExporter, error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return &spanExporter{client: client}, nil
}

// ExportSpans implements sdktrace.SpanExporter.
func (x *spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	data := make([]spanData, len(spans))
	for i, s := range spans {
		data[i] = s
	}
	return x.exportData(ctx, data)
}

// dataExporter is an exporter that takes factgate's own spans as they are
// (spanExporter); the export queue hands any other exporter the SDK's
// ReadOnlySpans.
type dataExporter interface {
	exportData(ctx context.Context, spans []spanData) error
}

// exportData exports SDK spans and factgate's own alike. The encoder copies what
// it reads: factgate's own spans give their attributes back to the pool after.
func (x *spanExporter) exportData(ctx context.Context, spans []spanData) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	groups := x.enc.encode(spans)
	for _, s := range spans {
		if own, ok := s.(*span); ok {
			own.release()
		}
	}
	if len(groups) == 0 {
		return nil
	}
	for len(x.msgs) < len(groups) {
		x.msgs = append(x.msgs, &tracepb.ResourceSpans{})
	}
	msgs := x.msgs[:len(groups)]
	for i, g := range groups {
		// The client marshals the request before UploadTraces returns: the
		// encoder's buffer is free again after it.
		msgs[i].ProtoReflect().SetUnknown(g)
	}
	err := x.client.UploadTraces(ctx, msgs)
	for _, m := range msgs {
		m.ProtoReflect().SetUnknown(nil)
	}
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown implements sdktrace.SpanExporter: it stops the client.
func (x *spanExporter) Shutdown(ctx context.Context) error {
	var err error
	x.stop.Do(func() { err = x.client.Stop(ctx) })
	return err
}

var _ sdktrace.SpanExporter = (*spanExporter)(nil)

// spanEncoder writes spans as OTLP protobuf (opentelemetry-proto's
// trace/v1 ResourceSpans), field by field in field-number order and leaving out
// the fields proto3 leaves out, as proto.Marshal writes what the official
// exporter's transformation (otlptrace/internal/tracetransform) makes of them.
// Its buffer is reused from batch to batch.
type spanEncoder struct {
	b      []byte
	groups [][]byte
	// keys are the batch's resources and scopes, in the order they first come.
	keys      []groupKey
	resources []*resource.Resource
	bounds    [][2]int
	// res is the last resource encoded, and its bytes (the resource is the
	// tracer provider's: one for every span).
	res      *resource.Resource
	resBytes []byte
}

type groupKey struct {
	res   *resource.Resource
	scope instrumentation.Scope
}

// The field numbers of opentelemetry-proto's messages.
const (
	fieldResourceSpansResource   = 1
	fieldResourceSpansScopeSpans = 2
	fieldResourceSpansSchemaURL  = 3

	fieldResourceAttributes = 1

	fieldScopeSpansScope     = 1
	fieldScopeSpansSpans     = 2
	fieldScopeSpansSchemaURL = 3

	fieldScopeName       = 1
	fieldScopeVersion    = 2
	fieldScopeAttributes = 3

	fieldSpanTraceID        = 1
	fieldSpanSpanID         = 2
	fieldSpanTraceState     = 3
	fieldSpanParentSpanID   = 4
	fieldSpanName           = 5
	fieldSpanKind           = 6
	fieldSpanStart          = 7
	fieldSpanEnd            = 8
	fieldSpanAttributes     = 9
	fieldSpanDroppedAttrs   = 10
	fieldSpanEvents         = 11
	fieldSpanDroppedEvents  = 12
	fieldSpanLinks          = 13
	fieldSpanDroppedLinks   = 14
	fieldSpanStatus         = 15
	fieldSpanFlags          = 16
	fieldEventTime          = 1
	fieldEventName          = 2
	fieldEventAttributes    = 3
	fieldEventDroppedAttrs  = 4
	fieldLinkTraceID        = 1
	fieldLinkSpanID         = 2
	fieldLinkAttributes     = 4
	fieldLinkDroppedAttrs   = 5
	fieldLinkFlags          = 6
	fieldStatusMessage      = 2
	fieldStatusCode         = 3
	fieldKeyValueKey        = 1
	fieldKeyValueValue      = 2
	fieldAnyString          = 1
	fieldAnyBool            = 2
	fieldAnyInt             = 3
	fieldAnyDouble          = 4
	fieldAnyArray           = 5
	fieldAnyKeyValueList    = 6
	fieldAnyBytes           = 7
	fieldArrayValues        = 1
	fieldKeyValueListValues = 1

	// SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK and SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// encode writes spans as one ResourceSpans content per resource (its fields,
// without the message's own tag and length), in the buffer: valid until the next
// call. Resources, and scopes within a resource, come in the order their first
// span comes; spans keep their order.
func (e *spanEncoder) encode(spans []spanData) [][]byte {
	e.b, e.groups, e.keys, e.resources, e.bounds = e.b[:0], e.groups[:0], e.keys[:0], e.resources[:0], e.bounds[:0]
	for _, s := range spans {
		if s == nil {
			continue
		}
		k := groupKey{s.Resource(), s.InstrumentationScope()}
		if !slices.ContainsFunc(e.keys, func(have groupKey) bool { return have.scope == k.scope && resourceEqual(have.res, k.res) }) {
			e.keys = append(e.keys, k)
		}
		if !slices.ContainsFunc(e.resources, func(have *resource.Resource) bool { return resourceEqual(have, k.res) }) {
			e.resources = append(e.resources, k.res)
		}
	}
	for _, r := range e.resources {
		from := len(e.b)
		if r != nil {
			e.b = appendTag(e.b, fieldResourceSpansResource, protowire.BytesType)
			e.b = appendBytes(e.b, e.resource(r))
		}
		for _, k := range e.keys {
			if resourceEqual(k.res, r) {
				e.scopeSpans(k, spans)
			}
		}
		if r != nil {
			e.str(fieldResourceSpansSchemaURL, r.SchemaURL())
		}
		e.bounds = append(e.bounds, [2]int{from, len(e.b)})
	}
	for _, b := range e.bounds {
		e.groups = append(e.groups, e.b[b[0]:b[1]:b[1]])
	}
	return e.groups
}

func resourceEqual(a, b *resource.Resource) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Equivalent() == b.Equivalent()
}

// resource is the Resource message of r (its attributes), kept for the next
// batch.
func (e *spanEncoder) resource(r *resource.Resource) []byte {
	if r == e.res && e.resBytes != nil {
		return e.resBytes
	}
	var sub spanEncoder
	for it := r.Iter(); it.Next(); {
		sub.keyValue(fieldResourceAttributes, it.Attribute())
	}
	e.res, e.resBytes = r, append([]byte{}, sub.b...)
	return e.resBytes
}

// scopeSpans writes the ScopeSpans of the spans of k's resource and scope.
func (e *spanEncoder) scopeSpans(k groupKey, spans []spanData) {
	at := e.open(fieldResourceSpansScopeSpans)
	if k.scope != (instrumentation.Scope{}) {
		sc := e.open(fieldScopeSpansScope)
		e.str(fieldScopeName, k.scope.Name)
		e.str(fieldScopeVersion, k.scope.Version)
		for it := k.scope.Attributes.Iter(); it.Next(); {
			e.keyValue(fieldScopeAttributes, it.Attribute())
		}
		e.close(sc)
	}
	for _, s := range spans {
		if s == nil || !resourceEqual(s.Resource(), k.res) || s.InstrumentationScope() != k.scope {
			continue
		}
		e.span(s)
	}
	e.str(fieldScopeSpansSchemaURL, k.scope.SchemaURL)
	e.close(at)
}

// span writes one Span.
func (e *spanEncoder) span(s spanData) {
	at := e.open(fieldScopeSpansSpans)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	e.bytes(fieldSpanTraceID, tid[:])
	e.bytes(fieldSpanSpanID, sid[:])
	e.str(fieldSpanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		e.bytes(fieldSpanParentSpanID, psid[:])
	}
	e.str(fieldSpanName, s.Name())
	e.varint(fieldSpanKind, uint64(spanKind(s.SpanKind())))
	e.fixed64(fieldSpanStart, unixNano(s.StartTime().UnixNano()))
	e.fixed64(fieldSpanEnd, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		e.keyValue(fieldSpanAttributes, kv)
	}
	e.varint(fieldSpanDroppedAttrs, clampCount(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		a := e.open(fieldSpanEvents)
		e.fixed64(fieldEventTime, unixNano(ev.Time.UnixNano()))
		e.str(fieldEventName, ev.Name)
		for _, kv := range ev.Attributes {
			e.keyValue(fieldEventAttributes, kv)
		}
		e.varint(fieldEventDroppedAttrs, clampCount(ev.DroppedAttributeCount))
		e.close(a)
	}
	e.varint(fieldSpanDroppedEvents, clampCount(s.DroppedEvents()))
	for _, l := range s.Links() {
		a := e.open(fieldSpanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		e.bytes(fieldLinkTraceID, ltid[:])
		e.bytes(fieldLinkSpanID, lsid[:])
		for _, kv := range l.Attributes {
			e.keyValue(fieldLinkAttributes, kv)
		}
		e.varint(fieldLinkDroppedAttrs, clampCount(l.DroppedAttributeCount))
		e.fixed32(fieldLinkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		e.close(a)
	}
	e.varint(fieldSpanDroppedLinks, clampCount(s.DroppedLinks()))
	st := s.Status()
	a := e.open(fieldSpanStatus)
	e.str(fieldStatusMessage, st.Description)
	e.varint(fieldStatusCode, statusCode(st.Code))
	e.close(a)
	e.fixed32(fieldSpanFlags, spanFlags(sc.TraceFlags(), parent))
	e.close(at)
}

// keyValue writes kv as a KeyValue field num. A scalar (nearly every
// attribute) is written with its lengths computed first, the rest as nested
// messages whose lengths close sets.
func (e *spanEncoder) keyValue(num protowire.Number, kv attribute.KeyValue) {
	key := string(kv.Key)
	v := kv.Value
	var anyLen int
	switch v.Type() {
	case attribute.STRING:
		anyLen = 1 + sizeBytes(len(v.AsString()))
	case attribute.INT64:
		anyLen = 1 + protowire.SizeVarint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		anyLen = 1 + 8
	case attribute.BOOL:
		anyLen = 1 + 1
	}
	if anyLen == 0 || num >= 16 {
		e.nestedKeyValue(num, kv)
		return
	}
	n := 1 + sizeBytes(anyLen) // the value field
	if key != "" {
		n += 1 + sizeBytes(len(key))
	}
	e.b = append(e.b, byte(num)<<3|byte(protowire.BytesType))
	e.b = appendVarint(e.b, uint64(n))
	if key != "" {
		e.b = append(e.b, fieldKeyValueKey<<3|byte(protowire.BytesType))
		e.b = appendString(e.b, key)
	}
	e.b = append(e.b, fieldKeyValueValue<<3|byte(protowire.BytesType))
	e.b = appendVarint(e.b, uint64(anyLen))
	switch v.Type() {
	case attribute.STRING:
		e.b = append(e.b, fieldAnyString<<3|byte(protowire.BytesType))
		e.b = appendString(e.b, v.AsString())
	case attribute.INT64:
		e.b = append(e.b, fieldAnyInt<<3|byte(protowire.VarintType))
		e.b = appendVarint(e.b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		e.b = append(e.b, fieldAnyDouble<<3|byte(protowire.Fixed64Type))
		e.b = protowire.AppendFixed64(e.b, math.Float64bits(v.AsFloat64()))
	case attribute.BOOL:
		e.b = append(e.b, fieldAnyBool<<3|byte(protowire.VarintType), byte(protowire.EncodeBool(v.AsBool())))
	}
}

// sizeBytes is the size of a length-delimited field's length and content of n
// bytes.
func sizeBytes(n int) int { return protowire.SizeVarint(uint64(n)) + n }

// nestedKeyValue writes kv as a KeyValue field num, its value as a nested
// message.
func (e *spanEncoder) nestedKeyValue(num protowire.Number, kv attribute.KeyValue) {
	at := e.open(num)
	e.str(fieldKeyValueKey, string(kv.Key))
	v := e.open(fieldKeyValueValue)
	e.value(kv.Value)
	e.close(v)
	e.close(at)
}

// value writes the fields of the AnyValue of v.
func (e *spanEncoder) value(v attribute.Value) {
	switch v.Type() {
	case attribute.BOOL:
		e.b = appendTag(e.b, fieldAnyBool, protowire.VarintType)
		e.b = appendVarint(e.b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		e.b = appendTag(e.b, fieldAnyInt, protowire.VarintType)
		e.b = appendVarint(e.b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		e.b = appendTag(e.b, fieldAnyDouble, protowire.Fixed64Type)
		e.b = protowire.AppendFixed64(e.b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		e.b = appendTag(e.b, fieldAnyString, protowire.BytesType)
		e.b = appendString(e.b, v.AsString())
	case attribute.BYTESLICE:
		e.b = appendTag(e.b, fieldAnyBytes, protowire.BytesType)
		e.b = appendBytes(e.b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		e.array(len(v.AsBoolSlice()), func(i int) attribute.Value { return attribute.BoolValue(v.AsBoolSlice()[i]) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		e.array(len(s), func(i int) attribute.Value { return attribute.Int64Value(s[i]) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		e.array(len(s), func(i int) attribute.Value { return attribute.Float64Value(s[i]) })
	case attribute.STRINGSLICE:
		a := e.open(fieldAnyArray)
		for _, s := range v.AsStringSlice() {
			el := e.open(fieldArrayValues)
			e.b = appendTag(e.b, fieldAnyString, protowire.BytesType)
			e.b = appendString(e.b, s)
			e.close(el)
		}
		e.close(a)
	case attribute.SLICE:
		s := v.AsSlice()
		e.array(len(s), func(i int) attribute.Value { return s[i] })
	case attribute.MAP:
		a := e.open(fieldAnyKeyValueList)
		for _, kv := range v.AsMap() {
			e.keyValue(fieldKeyValueListValues, kv)
		}
		e.close(a)
	case attribute.EMPTY:
	default:
		e.b = appendTag(e.b, fieldAnyString, protowire.BytesType)
		e.b = appendString(e.b, "INVALID")
	}
}

// array writes an ArrayValue of n values.
func (e *spanEncoder) array(n int, at func(int) attribute.Value) {
	a := e.open(fieldAnyArray)
	for i := range n {
		el := e.open(fieldArrayValues)
		e.value(at(i))
		e.close(el)
	}
	e.close(a)
}

// open starts the embedded message field num, with a one-byte length that
// close sets; it returns where the message's content starts.
func (e *spanEncoder) open(num protowire.Number) int {
	e.b = appendTag(e.b, num, protowire.BytesType)
	e.b = append(e.b, 0)
	return len(e.b)
}

// close sets the length of the message open started at start, moving its
// content when the length takes more than a byte.
func (e *spanEncoder) close(start int) {
	n := len(e.b) - start
	if n < 0x80 {
		e.b[start-1] = byte(n)
		return
	}
	extra := protowire.SizeVarint(uint64(n)) - 1
	e.b = append(e.b, make([]byte, extra)...)
	copy(e.b[start+extra:], e.b[start:start+n])
	protowire.AppendVarint(e.b[:start-1], uint64(n))
}

// str writes a string field, left out when empty.
func (e *spanEncoder) str(num protowire.Number, s string) {
	if s == "" {
		return
	}
	e.b = appendTag(e.b, num, protowire.BytesType)
	e.b = appendString(e.b, s)
}

// bytes writes a bytes field, left out when empty.
func (e *spanEncoder) bytes(num protowire.Number, b []byte) {
	if len(b) == 0 {
		return
	}
	e.b = appendTag(e.b, num, protowire.BytesType)
	e.b = appendBytes(e.b, b)
}

// varint writes a varint field, left out when 0.
func (e *spanEncoder) varint(num protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	e.b = appendTag(e.b, num, protowire.VarintType)
	e.b = appendVarint(e.b, v)
}

// fixed64 writes a fixed64 field, left out when 0.
func (e *spanEncoder) fixed64(num protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	e.b = appendTag(e.b, num, protowire.Fixed64Type)
	e.b = protowire.AppendFixed64(e.b, v)
}

// fixed32 writes a fixed32 field, left out when 0.
func (e *spanEncoder) fixed32(num protowire.Number, v uint32) {
	if v == 0 {
		return
	}
	e.b = appendTag(e.b, num, protowire.Fixed32Type)
	e.b = protowire.AppendFixed32(e.b, v)
}

func unixNano(ns int64) uint64 { return uint64(max(0, ns)) }

func clampCount(n int) uint64 {
	if n <= 0 {
		return 0
	}
	return uint64(min(int64(n), math.MaxUint32))
}

// spanKind is the Span.SpanKind enum of k.
func spanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return uint64(tracepb.Status_STATUS_CODE_OK)
	case codes.Error:
		return uint64(tracepb.Status_STATUS_CODE_ERROR)
	}
	return uint64(tracepb.Status_STATUS_CODE_UNSET)
}

// spanFlags are the W3C trace flags and whether the parent is remote.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// appendTag is protowire.AppendTag, a byte without a call for the fields
// below 16 (every field but a span's flags).
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	if num < 16 {
		return append(b, byte(num)<<3|byte(typ))
	}
	return protowire.AppendTag(b, num, typ)
}

// appendVarint is protowire.AppendVarint, a byte without a call below 128.
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

func appendString(b []byte, s string) []byte { return append(appendVarint(b, uint64(len(s))), s...) }

func appendBytes(b []byte, v []byte) []byte { return append(appendVarint(b, uint64(len(v))), v...) }
