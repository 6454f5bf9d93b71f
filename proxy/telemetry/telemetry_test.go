package telemetry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestOffIsNil(t *testing.T) {
	tel, err := New(Config{}, nil, nil)
	if err != nil || tel != nil {
		t.Fatalf("New without enabled: %v, %v; want no tracer", tel, err)
	}
	// Every hook of a nil tracer does nothing.
	var r *Request
	r.End(200, "")
	r.Fail("x")
	var c *Call
	c.StartTry(nil, "", "", false, 0).End(200, "ok", nil)
	c.Answer(200, nil)
	c.EndStream(true, "")
	if tel.StartCall(context.Background(), "draft", "/v1/chat/completions", nil) != nil || tel.Shutdown(context.Background()) != nil {
		t.Error("a nil tracer did something")
	}
}

// Bad settings of the environment are errors that name the variable, before the
// first request; the SDK alone would log them and carry on with its default.
func TestEnvErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ name, env, value, want string }{
		{"an unknown sampler", "OTEL_TRACES_SAMPLER", "sometimes", "OTEL_TRACES_SAMPLER"},
		{"a ratio over 1", "OTEL_TRACES_SAMPLER_ARG", "1.5", "OTEL_TRACES_SAMPLER_ARG"},
		{"an unknown protocol", "OTEL_EXPORTER_OTLP_PROTOCOL", "thrift", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"an unknown exporter", "OTEL_TRACES_EXPORTER", "zipkin", "OTEL_TRACES_EXPORTER"},
		{"a queue size of 0", "OTEL_BSP_MAX_QUEUE_SIZE", "0", "OTEL_BSP_MAX_QUEUE_SIZE"},
		{"a delay that is no number", "OTEL_BSP_SCHEDULE_DELAY", "5s", "OTEL_BSP_SCHEDULE_DELAY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			if tc.env == "OTEL_TRACES_SAMPLER_ARG" {
				t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
			}
			_, err := New(Config{Enabled: true}, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestEnvTurnsItOff(t *testing.T) {
	for _, env := range [][2]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if tel, err := New(Config{Enabled: true}, nil, nil); tel != nil || err != nil {
				t.Fatalf("%s=%s: %v, %v; want tracing off", env[0], env[1], tel, err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	c := Config{Providers: map[string]string{"azure": "azure.ai.openai", "nope": "openai", "blank": " "}}
	err := c.Validate(map[string]bool{"azure": true, "blank": true})
	if err == nil || !strings.Contains(err.Error(), `telemetry.providers: "nope" is not an upstream`) || !strings.Contains(err.Error(), "telemetry.providers.blank: empty provider name") {
		t.Fatalf("Validate: %v", err)
	}
}

// failingExporter fails every export while down is set, and counts the spans it
// took.
type failingExporter struct {
	mu    sync.Mutex
	down  bool
	block chan struct{} // when set, an export waits on it (a collector that hangs)
	got   int
}

func (e *failingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	down, block := e.down, e.block
	e.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if down {
		return errors.New("connection refused")
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *failingExporter) Shutdown(context.Context) error { return nil }

func (e *failingExporter) spans() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.got
}

func endSpans(tel *Telemetry, n int) {
	for range n {
		_, s := tel.start(context.Background(), "s", trace.SpanKindInternal, time.Time{}, nil)
		s.End()
	}
}

// A collector that is down: the batches are dropped and counted, nothing waits;
// once it is back the spans flow again.
func TestDropsCountedWhileTheCollectorIsDownAndExportResumes(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp := &failingExporter{down: true}
	tel, err := New(Config{Enabled: true}, reg, nil, WithExporter(exp), WithSampler(sdktrace.AlwaysSample()),
		WithBatching(Batching{QueueSize: 100, BatchSize: 10, Delay: 10 * time.Millisecond, ExportTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	endSpans(tel, 30)
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(tel.queue.dropped[dropExportFailed]); got != 30 {
		t.Errorf("dropped (export_failed) %v, want the 30 spans of the failed batches", got)
	}
	exp.mu.Lock()
	exp.down = false
	exp.mu.Unlock()
	endSpans(tel, 5)
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exp.spans() != 5 || testutil.ToFloat64(tel.queue.exported) != 5 {
		t.Errorf("after the collector came back: %d spans exported (metric %v), want 5", exp.spans(), testutil.ToFloat64(tel.queue.exported))
	}
}

// A collector that hangs: the queue fills, and a span that finds it full is
// dropped at once and counted — ending a span never waits.
func TestAFullQueueDropsWithoutWaiting(t *testing.T) {
	exp := &failingExporter{block: make(chan struct{})}
	tel, err := New(Config{Enabled: true}, prometheus.NewRegistry(), nil, WithExporter(exp), WithSampler(sdktrace.AlwaysSample()),
		WithBatching(Batching{QueueSize: 8, BatchSize: 4, Delay: time.Millisecond, ExportTimeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	endSpans(tel, 1000)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ending 1000 spans took %v with the collector hanging", d)
	}
	if got := testutil.ToFloat64(tel.queue.dropped[dropQueueFull]); got < 1000-8-4 {
		t.Errorf("dropped (queue_full) %v of 1000 with a queue of 8", got)
	}
	close(exp.block)
	_ = tel.Shutdown(context.Background())
}

// Shutdown exports what is queued within its deadline; what it cannot is counted.
func TestShutdownFlushesWithinTheDeadline(t *testing.T) {
	exp := &failingExporter{}
	tel, err := New(Config{Enabled: true}, prometheus.NewRegistry(), nil, WithExporter(exp), WithSampler(sdktrace.AlwaysSample()),
		WithBatching(Batching{QueueSize: 100, BatchSize: 50, Delay: time.Hour, ExportTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	endSpans(tel, 20) // the schedule would wait an hour: only the shutdown exports them
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exp.spans() != 20 {
		t.Errorf("exported %d spans at shutdown, want 20", exp.spans())
	}

	hung := &failingExporter{block: make(chan struct{})}
	defer close(hung.block)
	tel, err = New(Config{Enabled: true}, prometheus.NewRegistry(), nil, WithExporter(hung), WithSampler(sdktrace.AlwaysSample()),
		WithBatching(Batching{QueueSize: 100, BatchSize: 50, Delay: time.Hour, ExportTimeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	endSpans(tel, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := tel.Shutdown(ctx); err == nil {
		t.Error("a shutdown cut by its deadline reported no error")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Shutdown took %v past a 200ms deadline", d)
	}
	if got := testutil.ToFloat64(tel.queue.dropped[dropShutdown]); got != 20 {
		t.Errorf("dropped (shutdown) %v, want 20", got)
	}
}

func TestRequestAndAnswerAttributes(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := New(Config{Enabled: true, Providers: map[string]string{"az": "azure.ai.openai"}}, nil, nil, WithExporter(exp), WithSampler(sdktrace.AlwaysSample()),
		WithBatching(Batching{QueueSize: 100, BatchSize: 10, Delay: time.Millisecond, ExportTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	body := []byte(`{"messages":[{"role":"user","content":"a \"quoted\" model: x"}],"model":"gpt-4o","temperature":0,"top_p":0.9,"max_completion_tokens":300,"stop":["END","\u0000x"],"seed":7,"n":2,"response_format":{"type":"json_schema"},"service_tier":"flex"}`)
	c := tel.StartCall(context.Background(), "judge", "/v1/chat/completions", body)
	c.Answer(200, []byte(`{"id":"chatcmpl-9","model":"gpt-4o-2024","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"x"}},{"index":1,"finish_reason":"length","message":{"role":"assistant","content":"y"}}],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}},"system_fingerprint":"fp_1"}`))
	resp := tel.StartCall(context.Background(), "draft", "/v1/responses", []byte(`{"model":"gpt-5","input":"hi","max_output_tokens":99,"text":{"format":{"type":"json_object"}}}`))
	resp.Answer(200, []byte(`{"id":"resp_1","object":"response","model":"gpt-5","status":"completed","usage":{"input_tokens":4,"output_tokens":2}}`))
	_ = tel.ForceFlush(context.Background())
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	chat, r := attrs(spans[0]), attrs(spans[1])
	for k, want := range map[string]string{
		"gen_ai.request.model": "gpt-4o", "gen_ai.request.temperature": "0", "gen_ai.request.top_p": "0.9", "gen_ai.request.max_tokens": "300",
		"gen_ai.request.stop_sequences": `["END","\u0000x"]`, "gen_ai.request.seed": "7", "gen_ai.request.choice.count": "2", "gen_ai.output.type": "json",
		"openai.request.service_tier": "flex", "gen_ai.response.id": "chatcmpl-9", "gen_ai.response.model": "gpt-4o-2024",
		"gen_ai.response.finish_reasons": `["stop","length"]`, "gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "3",
		"gen_ai.usage.cache_read.input_tokens": "8", "openai.response.system_fingerprint": "fp_1", "factgate.call.kind": "judge",
	} {
		if chat[k] != want {
			t.Errorf("chat %s = %q, want %q", k, chat[k], want)
		}
	}
	if spans[0].Name != "chat gpt-4o" {
		t.Errorf("span name %q", spans[0].Name)
	}
	for k, want := range map[string]string{"openai.api.type": "responses", "gen_ai.request.max_tokens": "99", "gen_ai.output.type": "json",
		"gen_ai.response.finish_reasons": `["completed"]`, "gen_ai.usage.input_tokens": "4", "gen_ai.usage.output_tokens": "2"} {
		if r[k] != want {
			t.Errorf("responses %s = %q, want %q", k, r[k], want)
		}
	}
}

func TestContentInTheConventionsSchema(t *testing.T) {
	in, sys := inputMessages([]byte(`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"call_1","content":"42"}]}`))
	if sys != "" {
		t.Errorf("a chat request's system message is in the history, not system_instructions: %s", sys)
	}
	m := gjson.Parse(in)
	for path, want := range map[string]string{
		"0.role": "system", "0.parts.0.type": "text", "0.parts.0.content": "be brief",
		"1.parts.0.content": "look", "1.parts.1.type": "uri", "1.parts.1.modality": "image", "1.parts.1.uri": "https://x/y.png",
		"2.parts.0.type": "tool_call", "2.parts.0.id": "call_1", "2.parts.0.name": "get", "2.parts.0.arguments.a": "1",
		"3.role": "tool", "3.parts.0.type": "tool_call_response", "3.parts.0.id": "call_1", "3.parts.0.result": "42",
	} {
		if got := m.Get(path).String(); got != want {
			t.Errorf("%s = %q, want %q in %s", path, got, want, in)
		}
	}
	in, sys = responsesInput([]byte(`{"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call_output","call_id":"c","output":"ok"}]}`))
	if gjson.Get(sys, "0.content").Str != "be brief" || gjson.Get(in, "0.parts.0.content").Str != "hi" || gjson.Get(in, "1.parts.0.result").Str != "ok" {
		t.Errorf("responses input %s, instructions %s", in, sys)
	}
	out := outputMessages([]byte(`{"choices":[{"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`))
	if gjson.Get(out, "0.parts.0.content").Str != "done" || gjson.Get(out, "0.finish_reason").Str != "stop" {
		t.Errorf("output %s", out)
	}
}

// A relayed stream's events give the call its response attributes.
func TestStreamScan(t *testing.T) {
	s := &streamScan{content: true}
	stream := "data: {\"id\":\"c1\",\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"id\":\"c1\",\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"
	// In pieces that cut lines anywhere.
	for i := 0; i < len(stream); i += 7 {
		s.scan([]byte(stream[i:min(i+7, len(stream))]))
	}
	tel := &Telemetry{content: true}
	c := &Call{t: tel}
	got := map[string]string{}
	for _, kv := range s.attributes(c, nil) {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	for k, want := range map[string]string{"gen_ai.response.id": "c1", "gen_ai.response.model": "m1", "gen_ai.response.finish_reasons": `["stop"]`,
		"gen_ai.usage.input_tokens": "5", "gen_ai.usage.output_tokens": "2"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if gjson.Get(got["gen_ai.output.messages"], "0.parts.0.content").Str != "Hello" {
		t.Errorf("output %s", got["gen_ai.output.messages"])
	}
}

// Each OTLP protocol the environment may name builds its exporter.
func TestEveryOTLPProtocolBuilds(t *testing.T) {
	for _, p := range []string{"http/protobuf", "http/json", "grpc"} {
		t.Run(p, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", p)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			tel, err := New(Config{Enabled: true}, prometheus.NewRegistry(), nil)
			if err != nil || tel == nil {
				t.Fatalf("%s: %v", p, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = tel.Shutdown(ctx)
		})
	}
}
