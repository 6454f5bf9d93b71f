package telemetry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// recordSpans keeps the spans that end, as the export queue gets them.
type recordSpans struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (r *recordSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r *recordSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	r.mu.Lock()
	r.spans = append(r.spans, s)
	r.mu.Unlock()
}
func (r *recordSpans) Shutdown(context.Context) error   { return nil }
func (r *recordSpans) ForceFlush(context.Context) error { return nil }

// encoderSpans are spans of every shape the encoder writes: a continued remote
// parent with tracestate, every attribute type, long values (lengths of two and
// three bytes), events, links, statuses, dropped attributes, two scopes (one with
// a version, a schema and attributes) and a resource with a schema.
func encoderSpans(t *testing.T, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := &recordSpans{}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("factgate"), attribute.String("deployment.environment.name", "test"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeCountLimit: 40, EventCountLimit: 4, LinkCountLimit: 4,
			AttributeValueLengthLimit: -1, AttributePerEventCountLimit: -1, AttributePerLinkCountLimit: -1}))
	proxyTracer := tp.Tracer(scopeName)
	stageTracer := tp.Tracer("github.com/factgate/factgate/interceptors", trace.WithInstrumentationVersion("v1.2.3"),
		trace.WithSchemaURL(semconv.SchemaURL), trace.WithInstrumentationAttributes(attribute.Bool("stage", true)))
	var prop propagation.TraceContext
	long := strings.Repeat("事实", 3000) // 18 KB: a three-byte length
	for i := range n {
		parent := context.Background()
		if i%2 == 0 {
			parent = prop.Extract(parent, propagation.MapCarrier{
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"tracestate":  "vendor=opaque,other=1",
			})
		}
		ctx, server := proxyTracer.Start(parent, "POST /v1/chat/completions", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithTimestamp(time.Unix(1700000000, int64(i))))
		server.SetAttributes(
			attribute.String("http.request.method", "POST"),
			attribute.String("empty", ""),
			attribute.Int("http.response.status_code", 200),
			attribute.Int64("negative", -42),
			attribute.Float64("gen_ai.request.temperature", 0.35),
			attribute.Float64("zero", 0),
			attribute.Bool("yes", true), attribute.Bool("no", false),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop", "", "length"}),
			attribute.Int64Slice("ints", []int64{1, -2, 300}),
			attribute.Float64Slice("floats", []float64{0.5, -1e300}),
			attribute.BoolSlice("bools", []bool{true, false}),
			attribute.ByteSlice("bytes", []byte{0, 1, 255}),
			attribute.Slice("mixed", attribute.StringValue("a"), attribute.IntValue(2), attribute.SliceValue(attribute.BoolValue(true))),
			attribute.Map("map", attribute.String("k", "v"), attribute.Int("n", 1)),
			attribute.String("mid", strings.Repeat("x", 200)), // a two-byte length
		)
		if i%3 == 0 {
			server.SetAttributes(attribute.String("gen_ai.output.messages", long))
		}
		_, stage := stageTracer.Start(ctx, "factgate.validate")
		stage.AddEvent("factgate.upstream.skipped", trace.WithAttributes(attribute.String("factgate.upstream.name", "u")),
			trace.WithTimestamp(time.Unix(1700000001, 0)))
		stage.AddEvent("plain")
		stage.End()
		_, call := proxyTracer.Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithLinks(trace.Link{SpanContext: server.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", "x")}},
				trace.LinkFromContext(parent)))
		for j := range 45 { // over the limit: dropped attributes
			call.SetAttributes(attribute.Int("a"+string(rune('a'+j%26))+string(rune('a'+j/26)), j))
		}
		switch i % 3 {
		case 0:
			call.SetStatus(codes.Error, "the upstream answered with status 503")
		case 1:
			call.SetStatus(codes.Ok, "")
		}
		call.End()
		server.End(trace.WithTimestamp(time.Unix(1700000002, 0)))
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec.spans
}

// captureHTTP is an OTLP/HTTP receiver that keeps each request's body.
func captureHTTP(t *testing.T) (url string, bodies func() [][]byte) {
	t.Helper()
	var mu sync.Mutex
	var got [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() [][]byte { mu.Lock(); defer mu.Unlock(); return append([][]byte(nil), got...) }
}

// The encoder's bytes are the official exporter's, byte for byte, over
// OTLP/HTTP: the same spans exported by otlptracehttp.New (tracetransform and
// proto.Marshal) and by spanExporter through otlptracehttp's client.
func TestSpanEncoderMatchesOTLPExporter(t *testing.T) {
	ctx := context.Background()
	spans := encoderSpans(t, 7)
	officialURL, officialBodies := captureHTTP(t)
	ourURL, ourBodies := captureHTTP(t)
	official, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(officialURL))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newSpanExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(ourURL)))
	if err != nil {
		t.Fatal(err)
	}
	// Twice: the second batch reuses the encoder's buffers.
	for _, batch := range [][]sdktrace.ReadOnlySpan{spans, spans[:5]} {
		if err := official.ExportSpans(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if err := ours.ExportSpans(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	_ = official.Shutdown(ctx)
	_ = ours.Shutdown(ctx)
	want, got := officialBodies(), ourBodies()
	if len(want) != 2 || len(got) != 2 {
		t.Fatalf("%d official exports, %d of ours; want 2 each", len(want), len(got))
	}
	for i := range want {
		compareExports(t, want[i], got[i])
	}
}

func compareExports(t *testing.T, want, got []byte) {
	t.Helper()
	var w, g collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(got, &g); err != nil {
		t.Fatalf("our export does not decode: %v", err)
	}
	if !proto.Equal(&w, &g) {
		t.Fatalf("decoded exports differ:\nofficial %v\nours     %v", &w, &g)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("exports decode alike but their bytes differ (%d and %d bytes)", len(want), len(got))
	}
	if n := len(w.ResourceSpans[0].ScopeSpans); n != 2 {
		t.Errorf("%d scopes, want 2", n)
	}
}

// traceCollector is an OTLP/gRPC receiver that keeps each request.
type traceCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu  sync.Mutex
	got [][]byte
}

func (c *traceCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.got = append(c.got, b)
	c.mu.Unlock()
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Over OTLP/gRPC the collector decodes the same request from either exporter.
func TestSpanEncoderMatchesOTLPExporterGRPC(t *testing.T) {
	ctx := context.Background()
	spans := encoderSpans(t, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &traceCollector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, col)
	go srv.Serve(ln)
	defer srv.Stop()
	official, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(ln.Addr().String()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newSpanExporter(ctx, otlptracegrpc.NewClient(otlptracegrpc.WithEndpoint(ln.Addr().String()), otlptracegrpc.WithInsecure()))
	if err != nil {
		t.Fatal(err)
	}
	if err := official.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	if err := ours.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	_ = official.Shutdown(ctx)
	_ = ours.Shutdown(ctx)
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.got) != 2 {
		t.Fatalf("%d exports, want 2", len(col.got))
	}
	compareExports(t, col.got[0], col.got[1])
}

// BenchmarkSpanEncoder measures encoding a batch of 512 spans of relayed
// requests (factgate's own spans) as OTLP bytes.
func BenchmarkSpanEncoder(b *testing.B) {
	var spans []spanData
	for _, s := range relayBatch(b) {
		spans = append(spans, readOnly(s))
	}
	var e spanEncoder
	b.ReportAllocs()
	for b.Loop() {
		e.encode(spans)
	}
}

// keepData is an exporter that keeps factgate's own spans as they are.
type keepData struct {
	mu    sync.Mutex
	spans []spanData
}

func (k *keepData) exportData(_ context.Context, spans []spanData) error {
	k.mu.Lock()
	k.spans = append(k.spans, spans...)
	k.mu.Unlock()
	return nil
}
func (k *keepData) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (k *keepData) Shutdown(context.Context) error                             { return nil }

// relayBatch is the 512 spans of 256 relayed requests through the hooks.
func relayBatch(tb testing.TB) []spanData {
	tb.Helper()
	keep := &keepData{}
	tel, err := New(Config{Enabled: true}, nil, nil, WithExporter(keep), WithSampler(sdktrace.AlwaysSample()))
	if err != nil {
		tb.Fatal(err)
	}
	runRelay(tel, 256)
	_ = tel.Shutdown(context.Background())
	return keep.spans
}

// factgate's own spans (a request's, its call's, a retried call's tries, a
// skipped upstream's event, a failed call) encode as the official exporter
// encodes the same spans made SDK spans.
func TestOwnSpansEncodeAsTheOTLPExporter(t *testing.T) {
	ctx := context.Background()
	keep := &keepData{}
	tel, err := New(Config{Enabled: true}, nil, nil, WithExporter(keep), WithSampler(sdktrace.AlwaysSample()))
	if err != nil {
		t.Fatal(err)
	}
	runRelay(tel, 3)
	in := newRelayInputs()
	r := tel.StartRequest(&in.rc, time.Now())
	c := tel.StartCall(r.Context(), KindRelay, "/v1/chat/completions", in.body)
	c.Skip("cold", "circuit_open")
	c.StartTry(in.req, "u", "KEY_A", false, 0).End(503, "status_503", nil)
	c.StartTry(in.req, "v", "", true, 1500*time.Millisecond).End(0, "timeout", errors.New("timed out"))
	c.Fail(errors.New("every upstream failed"))
	r.Fail("upstream_timeout")
	r.End(504, "")
	_ = tel.Shutdown(ctx)
	if len(keep.spans) != 3*2+4 {
		t.Fatalf("%d spans, want 10", len(keep.spans))
	}
	officialURL, officialBodies := captureHTTP(t)
	ourURL, ourBodies := captureHTTP(t)
	official, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(officialURL))
	if err != nil {
		t.Fatal(err)
	}
	ros := make([]sdktrace.ReadOnlySpan, len(keep.spans))
	for i, s := range keep.spans {
		ros[i] = readOnly(s)
	}
	if err := official.ExportSpans(ctx, ros); err != nil {
		t.Fatal(err)
	}
	ours, err := newSpanExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(ourURL)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ours.exportData(ctx, keep.spans); err != nil {
		t.Fatal(err)
	}
	want, got := officialBodies(), ourBodies()
	if len(want) != 1 || len(got) != 1 {
		t.Fatalf("%d official exports, %d of ours; want 1 each", len(want), len(got))
	}
	var w, g collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(want[0], &w); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(got[0], &g); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&w, &g) || !bytes.Equal(want[0], got[0]) {
		t.Fatalf("exports differ:\nofficial %v\nours     %v", &w, &g)
	}
	spans := w.ResourceSpans[0].ScopeSpans[0].Spans
	last := spans[len(spans)-4:] // the failed request: two tries, the call, the server span
	if last[0].Name != "POST" || last[1].Name != "POST" || last[2].Name != "chat m" || last[3].Name != "POST /v1/chat/completions" {
		t.Errorf("the failed request's spans: %q %q %q %q", last[0].Name, last[1].Name, last[2].Name, last[3].Name)
	}
	if len(last[2].Events) != 1 || last[2].Status.Code != 2 || last[3].Status.Code != 2 {
		t.Errorf("the call's events %v, status %v; the server span's status %v", last[2].Events, last[2].Status, last[3].Status)
	}
}

// BenchmarkSpanExportOTLP measures exporting a batch of 512 relayed requests'
// spans over OTLP/HTTP to a loopback receiver: the official exporter, and the
// encoder through the official client.
func BenchmarkSpanExportOTLP(b *testing.B) {
	// As SDK spans: exportData would give factgate's own spans' attributes
	// back to the pool after the first export.
	var spans []sdktrace.ReadOnlySpan
	for _, s := range relayBatch(b) {
		spans = append(spans, readOnly(s))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	ctx := context.Background()
	b.Run("official", func(b *testing.B) {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.URL))
		if err != nil {
			b.Fatal(err)
		}
		defer exp.Shutdown(ctx)
		b.ReportAllocs()
		for b.Loop() {
			if err := exp.ExportSpans(ctx, spans); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoder", func(b *testing.B) {
		exp, err := newSpanExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(srv.URL)))
		if err != nil {
			b.Fatal(err)
		}
		defer exp.Shutdown(ctx)
		b.ReportAllocs()
		for b.Loop() {
			if err := exp.ExportSpans(ctx, spans); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// noExport drops every span.
type noExport struct{}

func (noExport) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (noExport) Shutdown(context.Context) error                             { return nil }

// The span limits of the environment apply to factgate's own spans as to the
// SDK's: values cut to OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, at most
// OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT attributes (the rest counted as dropped), and
// a key set twice (a retried call's provider) kept once, with its last value.
func TestOwnSpansKeepTheSpanLimits(t *testing.T) {
	for _, tc := range []struct {
		name, env, value string
		check            func(t *testing.T, s sdktrace.ReadOnlySpan)
	}{
		{"value length", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "3", func(t *testing.T, s sdktrace.ReadOnlySpan) {
			for _, a := range s.Attributes() {
				if a.Value.Type() == attribute.STRING && len([]rune(a.Value.AsString())) > 3 {
					t.Errorf("%s = %q: longer than the limit", a.Key, a.Value.AsString())
				}
			}
		}},
		{"count", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "4", func(t *testing.T, s sdktrace.ReadOnlySpan) {
			if n := len(s.Attributes()); n != 4 || s.DroppedAttributes() == 0 {
				t.Errorf("%d attributes, %d dropped; want 4 and some dropped", n, s.DroppedAttributes())
			}
		}},
		{"none", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "", func(t *testing.T, s sdktrace.ReadOnlySpan) {
			seen := map[attribute.Key]bool{}
			for _, a := range s.Attributes() {
				if seen[a.Key] {
					t.Errorf("%s twice", a.Key)
				}
				seen[a.Key] = true
			}
			if s.Name() == "chat m" && s.DroppedAttributes() != 0 {
				t.Errorf("%d attributes dropped", s.DroppedAttributes())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			exp := tracetest.NewInMemoryExporter()
			tel, err := New(Config{Enabled: true}, nil, nil, WithExporter(exp), WithSampler(sdktrace.AlwaysSample()))
			if err != nil {
				t.Fatal(err)
			}
			in := newRelayInputs()
			r := tel.StartRequest(&in.rc, time.Now())
			c := tel.StartCall(r.Context(), KindRelay, "/v1/chat/completions", in.body)
			c.StartTry(in.req, "u", "KEY_A", false, 0).End(503, "status_503", nil)
			c.StartTry(in.req, "v", "", true, 0).End(200, "ok", nil)
			c.Answer(200, in.answer)
			r.End(200, "")
			_ = tel.ForceFlush(context.Background())
			defer tel.Shutdown(context.Background()) // the in-memory exporter forgets its spans
			spans := exp.GetSpans().Snapshots()
			if len(spans) != 4 {
				t.Fatalf("%d spans, want 4", len(spans))
			}
			for _, s := range spans {
				tc.check(t, s)
			}
			for _, s := range spans {
				if s.Name() != "chat m" || tc.env != "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" || tc.value != "" {
					continue
				}
				for _, a := range s.Attributes() {
					if a.Key == "gen_ai.provider.name" && a.Value.AsString() != "openai" {
						t.Errorf("provider %q", a.Value.AsString())
					}
				}
			}
		})
	}
}
