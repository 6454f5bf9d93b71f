package proxy

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/proxy/telemetry"
)

// benchUpstream is a minimal fasthttp upstream answering a fixed completion, so
// that the benchmark measures the proxy rather than the upstream.
func benchUpstream(b *testing.B) string {
	b.Helper()
	return benchUpstreamAnswering(b, `PlayerA 在 1:24 打包主基地并向地图中央迁移。`)
}

// benchUpstreamAnswering answers every chat completion with content.
func benchUpstreamAnswering(b *testing.B, content string) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	answer, _ := sjson.SetBytes([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":64,"total_tokens":576}}`), "choices.0.message.content", content)
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		rc.SetContentType("application/json")
		rc.SetBody(answer)
	}}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String() + "/v1"
}

// benchPassthroughServer is a proxy whose one route passes everything through to
// benchUpstream.
func benchPassthroughServer(b *testing.B) *Server {
	b.Helper()
	up := benchUpstream(b)
	cfg, err := ParseConfig([]byte(`
log: {access: false}
upstreams: {u: {base_url: "`+up+`"}}
routes: [{name: r, default: true, upstream: u}]
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkPassthroughChat measures one non-streaming chat completion through the
// proxy's handler on a route with no interceptors (a 2 KB request body), including
// the loopback round trip to a minimal upstream.
func BenchmarkPassthroughChat(b *testing.B) {
	s := benchPassthroughServer(b)
	body := []byte(`{"model":"m","temperature":0.35,"messages":[{"role":"user","content":"` + strings.Repeat("0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)\\n", 28) + `"}]}`)
	benchChat(b, s, body, func(rc *fasthttp.RequestCtx) bool { return rc.Response.StatusCode() == 200 })
}

// BenchmarkPassthroughChatReplay is BenchmarkPassthroughChat with a realistic
// 24 KB request: a user message carrying a whole replay's operation log, so that
// reading the body (the bounded JSON check, the model lookup) weighs as much as it
// can on a route with no interceptors.
func BenchmarkPassthroughChatReplay(b *testing.B) {
	replay, err := os.ReadFile("testdata/revise/allied_vs_soviet.txt")
	if err != nil {
		b.Fatal(err)
	}
	s := benchPassthroughServer(b)
	body, _ := sjson.SetBytes([]byte(`{"model":"m","temperature":0.35,"messages":[{"role":"system","content":"你是红色警戒3录像分析师。"},{"role":"user","content":""}]}`), "messages.1.content", string(replay))
	benchChat(b, s, body, func(rc *fasthttp.RequestCtx) bool { return rc.Response.StatusCode() == 200 })
}

// BenchmarkValidatingRoute measures one non-streaming chat completion carrying the
// sample replay (23 KB) through a route with the ra3 pack, injection, validation
// and revision, whose upstream answers with a clean analysis (seven unit claims, no
// issue to revise): context resolution, the fact index (cached after the first
// request), the injected 22 KB prompt, the upstream round trip, claims parsing and
// every rule, the accepted-draft revision step, claims stripping and the trace.
func BenchmarkValidatingRoute(b *testing.B) {
	s := benchValidatingServer(b)
	benchChat(b, s, validatingRouteBody(b), func(rc *fasthttp.RequestCtx) bool {
		return rc.Response.StatusCode() == 200 && string(rc.Response.Header.Peek("X-Factgate-Issues")) == "draft=0;final=0;delivered=0"
	})
}

// validatingRouteBody is BenchmarkValidatingRoute's request: the sample replay
// (23 KB, a "\n" escape a line) in a user message after a system message.
func validatingRouteBody(b *testing.B) []byte {
	b.Helper()
	replay, err := os.ReadFile("testdata/revise/allied_vs_soviet.txt")
	if err != nil {
		b.Fatal(err)
	}
	body, _ := sjson.SetBytes([]byte(`{"model":"ra3-analyst","temperature":0.35,"messages":[{"role":"system","content":"你是红警 3 录像分析助手。"}]}`),
		"messages.-1", map[string]string{"role": "user", "content": "分析这局录像。\n\n" + string(replay)})
	return body
}

// BenchmarkAdmit measures admission of BenchmarkValidatingRoute's request, the
// proxy's own reading of every chat body before the chain runs: the bounded JSON
// check of the whole body and the request head (model, stream options).
func BenchmarkAdmit(b *testing.B) {
	s := benchValidatingServer(b)
	body := validatingRouteBody(b)
	var rc fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/v1/chat/completions")
	req.Header.SetContentType("application/json")
	rc.Init(&req, nil, nil)
	rc.Request.SetBody(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, head, ok := s.admit(&rc, time.Time{}); !ok || head.model.Str != "ra3-analyst" {
			b.Fatalf("not admitted: %d %s", rc.Response.StatusCode(), rc.Response.Body())
		}
	}
}

// benchValidatingServer is a proxy whose one route (pack ra3, inject, validate)
// goes to an upstream answering the clean analysis of the sample replay.
func benchValidatingServer(b *testing.B) *Server {
	b.Helper()
	caseJSON, err := os.ReadFile("testdata/bench/c01_clean.json")
	if err != nil {
		b.Fatal(err)
	}
	up := benchUpstreamAnswering(b, gjson.GetBytes(caseJSON, "answer").Str)
	cfg, err := ParseConfig([]byte(`
log: {access: false}
upstreams: {u: {base_url: "`+up+`"}}
routes:
  - {name: ra3, default: true, upstream: u, pack: ra3, inject: {}, validate: {}}
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchChat drives POST /v1/chat/completions with body through the server's
// handler in parallel; ok checks every response.
func benchChat(b *testing.B, s *Server, body []byte, ok func(*fasthttp.RequestCtx) bool) {
	benchPost(b, s, "/v1/chat/completions", body, ok)
}

// benchPost drives a POST of body to path through the server's handler in
// parallel; ok checks every response.
func benchPost(b *testing.B, s *Server, path string, body []byte, ok func(*fasthttp.RequestCtx) bool) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var rc fasthttp.RequestCtx
		var req fasthttp.Request // the request line and headers; the body is set below
		req.Header.SetMethod("POST")
		req.SetRequestURI(path)
		req.Header.SetContentType("application/json")
		for pb.Next() {
			rc.Init(&req, nil, nil)
			// As a server connection does: the body is read into the request's
			// pooled buffer, and the previous response is gone.
			rc.Request.SetBody(body)
			rc.Response.Reset()
			s.handle(&rc)
			if !ok(&rc) {
				b.Fatalf("status %d, issues %q: %.300s", rc.Response.StatusCode(), rc.Response.Header.Peek("X-Factgate-Issues"), rc.Response.Body())
			}
		}
	})
}

// BenchmarkHeldAnswer measures the response side of BenchmarkValidatingRoute
// alone: the held clean answer checked (holdAnswer), the response phases of the
// route's chain (validation, the accepted draft's revision step with its claims
// block stripped) and the delivered body (finalBody) — no network, no request
// phases. The exchanges are prepared in batches with the timer stopped: the
// request phases run on each and the answer arrives as a fresh body, as from the
// upstream.
func BenchmarkHeldAnswer(b *testing.B) {
	s := benchValidatingServer(b)
	rt := s.routeByName["ra3"]
	replay, err := os.ReadFile("testdata/revise/allied_vs_soviet.txt")
	if err != nil {
		b.Fatal(err)
	}
	request, _ := sjson.SetBytes([]byte(`{"model":"ra3-analyst","temperature":0.35,"messages":[{"role":"system","content":"你是红警 3 录像分析助手。"}]}`),
		"messages.-1", map[string]string{"role": "user", "content": "分析这局录像。\n\n" + string(replay)})
	caseJSON, err := os.ReadFile("testdata/bench/c01_clean.json")
	if err != nil {
		b.Fatal(err)
	}
	answer, _ := sjson.SetBytes([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":64,"total_tokens":576}}`),
		"choices.0.message.content", gjson.GetBytes(caseJSON, "answer").Str)
	header := [][2]string{{"Content-Type", "application/json"}}
	ctx := context.Background()
	type held struct {
		ex   *interceptors.Exchange
		resp *interceptors.Response
	}
	prepare := func() held {
		ex := &interceptors.Exchange{Route: rt.name, Model: "ra3-analyst", Original: request, Body: request, Trace: interceptors.NewTrace(rt.name)}
		for _, ic := range rt.chain {
			if rp, ok := ic.(interceptors.RequestPhase); ok {
				if err := rp.OnRequest(ctx, ex); err != nil {
					b.Fatal(err)
				}
			}
		}
		// The facts stage's index is ready, as it is when the upstream answers.
		if _, _, err := facts.FromExchange(ex); err != nil {
			b.Fatal(err)
		}
		return held{ex, &interceptors.Response{Status: 200, Header: header, Body: bytes.Clone(answer)}}
	}
	deliver := func(h held) []byte {
		s.holdAnswer(h.ex, h.resp, nil)
		if e := responsePhases(ctx, rt.chain, h.ex); e != nil {
			b.Fatal(e)
		}
		return s.finalBody(h.ex)
	}
	first := prepare()
	if out := deliver(first); strings.Contains(string(out), "unitClaims") || first.ex.ResponseHeaders == nil {
		b.Fatalf("the claims block is not stripped, or no headers: %.300s", out)
	}
	if got := headerValue(first.ex.ResponseHeaders, "X-Factgate-Issues"); got != "draft=0;final=0;delivered=0" {
		b.Fatalf("X-Factgate-Issues %q", got)
	}
	batch := make([]held, 128)
	next := len(batch)
	b.ReportAllocs()
	for b.Loop() {
		if next == len(batch) {
			b.StopTimer()
			for i := range batch {
				batch[i] = prepare()
			}
			runtime.GC() // the request phases' garbage is not the response side's
			next = 0
			b.StartTimer()
		}
		deliver(batch[next])
		next++
	}
}

// headerValue returns the value of the response header name, or "".
func headerValue(hs [][2]string, name string) string {
	for _, h := range hs {
		if h[0] == name {
			return h[1]
		}
	}
	return ""
}

// BenchmarkPassthroughChatTraced is BenchmarkPassthroughChat with tracing on
// (every request sampled): the server span, the call's, their attributes and the
// W3C traceparent to the upstream, exported over OTLP/HTTP to a receiver on
// loopback that reads and drops each export (factgate bench --tracing measures
// the same against the proxy binary).
func BenchmarkPassthroughChatTraced(b *testing.B) {
	benchPassthroughTraced(b, sdktrace.AlwaysSample())
}

// BenchmarkPassthroughChatTracedUnsampled is BenchmarkPassthroughChatTraced
// with a sampler that leaves every request out (OTEL_TRACES_SAMPLER=always_off):
// what a request a ratio sampler does not pick costs — its ids, the traceparent
// to the upstream, the hooks' checks.
func BenchmarkPassthroughChatTracedUnsampled(b *testing.B) {
	benchPassthroughTraced(b, sdktrace.NeverSample())
}

func benchPassthroughTraced(b *testing.B, sampler sdktrace.Sampler) {
	up := benchUpstream(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sink := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) { rc.SetContentType("application/x-protobuf") }}
	go sink.Serve(ln)
	b.Cleanup(func() { sink.Shutdown() })
	// The exporter the environment names, as factgate serve makes it.
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	b.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	cfg, err := ParseConfig([]byte(`
log: {access: false}
upstreams: {u: {base_url: "`+up+`"}}
routes: [{name: r, default: true, upstream: u}]
telemetry: {enabled: true}
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)), WithTelemetry(telemetry.WithSampler(sampler),
		telemetry.WithBatching(telemetry.Batching{QueueSize: 2048, BatchSize: 512, Delay: 100 * time.Millisecond, ExportTimeout: 5 * time.Second})))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.tel.Shutdown(context.Background()) })
	body := []byte(`{"model":"m","temperature":0.35,"messages":[{"role":"user","content":"` + strings.Repeat("0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)\\n", 28) + `"}]}`)
	benchChat(b, s, body, func(rc *fasthttp.RequestCtx) bool { return rc.Response.StatusCode() == 200 })
}
