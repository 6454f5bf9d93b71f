package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// relayInputs are a relayed chat completion's request and answer.
type relayInputs struct {
	rc           fasthttp.RequestCtx
	req          *fasthttp.Request
	body, answer []byte
}

func newRelayInputs() *relayInputs {
	in := &relayInputs{
		body:   []byte(`{"model":"m","temperature":0.35,"messages":[{"role":"user","content":"` + strings.Repeat("0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)\\n", 28) + `"}]}`),
		answer: []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"PlayerA 在 1:24 打包主基地并向地图中央迁移。"},"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":64,"total_tokens":576}}`),
		req:    fasthttp.AcquireRequest(),
	}
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/v1/chat/completions")
	req.SetBody(in.body)
	in.rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555}, nil)
	in.req.Header.SetMethod("POST")
	in.req.Header.SetHost("127.0.0.1:8000")
	in.req.Header.SetRequestURI("/v1/chat/completions")
	return in
}

// relay is what the proxy's hooks do for one relayed chat completion: the
// server span, the call's span with its one try, the answer's attributes.
func (in *relayInputs) relay(tel *Telemetry) {
	r := tel.StartRequest(&in.rc, time.Now())
	c := tel.StartCall(r.Context(), KindRelay, "/v1/chat/completions", in.body)
	t := c.StartTry(in.req, "u", "", false, 0)
	t.End(200, "ok", nil)
	c.Answer(200, in.answer)
	r.End(200, "")
}

// runRelay relays n requests through tel's hooks.
func runRelay(tel *Telemetry, n int) {
	in := newRelayInputs()
	for range n {
		in.relay(tel)
	}
}

func benchRelay(b *testing.B, tel *Telemetry) {
	in := newRelayInputs()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		in.relay(tel)
	}
}

// BenchmarkRelaySpans measures the spans of a relayed request, into an exporter
// that drops them as they come (factgate's own spans, not made SDK spans).
func BenchmarkRelaySpans(b *testing.B) {
	tel, err := New(Config{Enabled: true}, nil, nil, WithExporter(dropData{}), WithSampler(sdktrace.AlwaysSample()))
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	benchRelay(b, tel)
}

// BenchmarkRelaySpansOTLP measures the spans of a relayed request exported over
// OTLP/HTTP to a receiver on loopback that reads and drops each export: the
// batching goroutine's encoding is counted with -cpu 1.
func BenchmarkRelaySpansOTLP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	b.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	tel, err := New(Config{Enabled: true}, nil, nil, WithSampler(sdktrace.AlwaysSample()),
		WithBatching(Batching{QueueSize: 2048, BatchSize: 512, Delay: 100 * time.Millisecond, ExportTimeout: 5 * time.Second}))
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	benchRelay(b, tel)
	_ = tel.ForceFlush(context.Background())
}

// dropData drops every span, as spanExporter takes them, after encoding.
type dropData struct{}

func (dropData) exportData(_ context.Context, spans []spanData) error {
	for _, s := range spans {
		if own, ok := s.(*span); ok {
			own.release()
		}
	}
	return nil
}
func (dropData) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropData) Shutdown(context.Context) error                             { return nil }
