package proxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/factgate/factgate/proxy/telemetry"
)

// OpenTelemetry in process: the spans go to the SDK's in-memory exporter, so
// these tests run everywhere; proxy/jaeger_test.go checks the same against a real
// Jaeger.

// tracedHarness is a harness whose proxy traces every request into exp.
func tracedHarness(t *testing.T, script, config string) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	h := newHarness(t, script, config, WithTelemetry(telemetry.WithExporter(exp),
		telemetry.WithBatching(telemetry.Batching{QueueSize: 1024, BatchSize: 64, Delay: 20 * time.Millisecond, ExportTimeout: time.Second}),
		telemetry.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample()))))
	return h, exp
}

// spansOf waits until exp holds the ended server span of the trace tid (and a
// moment more for the spans that end after it), and returns the trace's spans.
func spansOf(t *testing.T, h *harness, exp *tracetest.InMemoryExporter, tid string) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_ = h.srv.tel.ForceFlush(context.Background())
		var out tracetest.SpanStubs
		server := false
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID().String() == tid {
				out = append(out, s)
				server = server || s.SpanKind == trace.SpanKindServer
			}
		}
		if server {
			time.Sleep(50 * time.Millisecond) // spans that end after the answer (facts in the background)
			_ = h.srv.tel.ForceFlush(context.Background())
			out = out[:0]
			for _, s := range exp.GetSpans() {
				if s.SpanContext.TraceID().String() == tid {
					out = append(out, s)
				}
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server span of trace %s among %d spans", tid, len(exp.GetSpans()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func attrOf(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func attrString(s tracetest.SpanStub, key string) string {
	v, _ := attrOf(s, key)
	return v.Emit()
}

func byName(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func children(spans tracetest.SpanStubs, parent tracetest.SpanStub) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Parent.SpanID() == parent.SpanContext.SpanID() {
			out = append(out, s)
		}
	}
	return out
}

const clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

func TestTelemetryRevisedRequestIsOneTraceWithTheHiddenCallsAsSpans(t *testing.T) {
	t.Parallel()
	draftUsage := map[string]int{"prompt_tokens": 9000, "completion_tokens": 400}
	h, exp := tracedHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer, Usage: draftUsage}, answerJSON{Content: storyFixedAnswer}),
		reviseRouteConfig("never", "")+"telemetry: {enabled: true}\n")
	clientParent := "00f067aa0ba902b7"
	status, hdr, body := h.post(t, "/v1/chat/completions", storyRequest(false),
		"traceparent", "00-"+clientTraceID+"-"+clientParent+"-01", "tracestate", "vendor=opaque")
	if status != 200 || hdr.Get("X-Factgate-Revisions") != "1" {
		t.Fatalf("status %d, revisions %q: %s", status, hdr.Get("X-Factgate-Revisions"), body)
	}
	spans := spansOf(t, h, exp, clientTraceID)

	servers := byName(spans, "POST /v1/chat/completions")
	if len(servers) != 1 {
		t.Fatalf("%d server spans in the client's trace, want 1: %v", len(servers), names(spans))
	}
	srv := servers[0]
	if srv.SpanKind != trace.SpanKindServer || srv.Parent.SpanID().String() != clientParent || !srv.Parent.IsRemote() {
		t.Errorf("server span: kind %v, parent %s (remote %v), want a server span under the client's span %s", srv.SpanKind, srv.Parent.SpanID(), srv.Parent.IsRemote(), clientParent)
	}
	// The client's trace spans many requests: factgate's own trace id stays its
	// own, and the two name each other.
	factgateID := hdr.Get("X-Factgate-Trace-Id")
	if factgateID == "" || factgateID == clientTraceID {
		t.Errorf("X-Factgate-Trace-Id %q: want an id of its own beside the client's trace", factgateID)
	}
	if got := attrString(srv, "factgate.trace_id"); got != factgateID {
		t.Errorf("factgate.trace_id %q, want the X-Factgate-Trace-Id %q", got, factgateID)
	}
	tr := h.trace(t, factgateID)
	if want := "00-" + clientTraceID + "-" + srv.SpanContext.SpanID().String() + "-01"; tr.Get("traceparent").Str != want {
		t.Errorf("the factgate trace's traceparent %q, want the server span's %q", tr.Get("traceparent").Str, want)
	}
	for key, want := range map[string]string{
		"factgate.route": "ra3", "factgate.pack": "ra3", "factgate.outcome": "resolved", "factgate.revisions": "1",
		"factgate.issues.final": "0", "factgate.issues.delivered": "0", "factgate.upstream": "mock",
		"factgate.request.model": "ra3-analyst", "http.response.status_code": "200", "factgate.facts.cache_hit": "false",
	} {
		if got := attrString(srv, key); got != want {
			t.Errorf("server span %s = %q, want %q", key, got, want)
		}
	}
	if d := attrString(srv, "factgate.issues.draft"); d == "" || d == "0" {
		t.Errorf("factgate.issues.draft %q: the draft had issues", d)
	}

	// Two calls, the draft and the revision, each a GenAI client span; each made
	// one try, whose HTTP attributes it carries.
	calls := byName(spans, "chat deepseek-chat")
	if len(calls) != 2 {
		t.Fatalf("%d call spans, want the draft and the revision: %v", len(calls), names(spans))
	}
	kinds := map[string]tracetest.SpanStub{}
	for _, c := range calls {
		kinds[attrString(c, "factgate.call.kind")] = c
		if c.SpanKind != trace.SpanKindClient {
			t.Errorf("call span kind %v", c.SpanKind)
		}
		for key, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "deepseek-chat", "gen_ai.response.model": "deepseek-chat", "openai.api.type": "chat_completions"} {
			if got := attrString(c, key); got != want {
				t.Errorf("call %s: %s = %q, want %q", c.Name, key, got, want)
			}
		}
		if !strings.HasPrefix(attrString(c, "gen_ai.response.id"), "chatcmpl-") || attrString(c, "gen_ai.response.finish_reasons") != `["stop"]` {
			t.Errorf("call: response id %q, finish reasons %q", attrString(c, "gen_ai.response.id"), attrString(c, "gen_ai.response.finish_reasons"))
		}
		if _, ok := attrOf(c, "gen_ai.input.messages"); ok {
			t.Error("message content exported without the opt-in")
		}
		if tries := children(spans, c); len(tries) != 0 || attrString(c, "factgate.upstream.name") != "mock" || attrString(c, "http.response.status_code") != "200" ||
			attrString(c, "server.address") != "127.0.0.1" {
			t.Errorf("call %s: tries %v, attributes %v: want one try to mock answered 200, on the call's span", attrString(c, "factgate.call.kind"), names(tries), c.Attributes)
		}
	}
	draft, revision := kinds["draft"], kinds["revision"]
	if draft.Name == "" || revision.Name == "" {
		t.Fatalf("call kinds %v, want draft and revision", kinds)
	}
	if attrString(draft, "gen_ai.usage.input_tokens") != "9000" || attrString(draft, "gen_ai.usage.output_tokens") != "400" {
		t.Errorf("draft usage %s/%s, want 9000/400", attrString(draft, "gen_ai.usage.input_tokens"), attrString(draft, "gen_ai.usage.output_tokens"))
	}
	if draft.Parent.SpanID() != srv.SpanContext.SpanID() {
		t.Error("the draft is not under the server span")
	}
	revise := byName(spans, "factgate.revise")
	if len(revise) != 1 || revision.Parent.SpanID() != revise[0].SpanContext.SpanID() || revise[0].Parent.SpanID() != srv.SpanContext.SpanID() {
		t.Errorf("the revision call is not under factgate.revise under the server span: %v", names(spans))
	}
	if v := byName(spans, "factgate.validate"); len(v) != 2 {
		t.Errorf("%d factgate.validate spans, want the draft's and the revision's", len(v))
	}
	if f := byName(spans, "factgate.facts"); len(f) != 1 || attrString(f[0], "factgate.facts.source") != "built" {
		t.Errorf("factgate.facts spans %v, want one that built the index", names(f))
	}

	// The upstream got the traceparent of each call, in the client's trace, and
	// the client's tracestate.
	recs := h.mock.Requests()
	if len(recs) != 2 {
		t.Fatalf("mock saw %d requests", len(recs))
	}
	callIDs := map[string]bool{}
	for _, c := range calls {
		callIDs[c.SpanContext.SpanID().String()] = true
	}
	for _, r := range recs {
		tp := strings.Split(r.Header.Get("Traceparent"), "-")
		if len(tp) != 4 || tp[1] != clientTraceID || !callIDs[tp[2]] {
			t.Errorf("upstream traceparent %q: want the client's trace and a call span's id", r.Header.Get("Traceparent"))
		}
		if r.Header.Get("Tracestate") != "vendor=opaque" {
			t.Errorf("upstream tracestate %q", r.Header.Get("Tracestate"))
		}
	}
}

func names(spans []tracetest.SpanStub) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func TestTelemetryARequestWithoutTraceparentStartsTheTraceItsFactgateIDNames(t *testing.T) {
	t.Parallel()
	h, exp := tracedHarness(t, reviseScript(answerJSON{Content: storyFixedAnswer}), reviseRouteConfig("never", "")+"telemetry: {enabled: true, content: true}\n")
	status, hdr, body := h.post(t, "/v1/chat/completions", storyRequest(true))
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	id := hdr.Get("X-Factgate-Trace-Id")
	spans := spansOf(t, h, exp, id) // fails unless the W3C trace id is factgate's
	srv := byName(spans, "POST /v1/chat/completions")
	if len(srv) != 1 || srv[0].Parent.IsValid() {
		t.Fatalf("want one root server span in trace %s: %v", id, names(spans))
	}
	tr := h.trace(t, id)
	if !strings.HasPrefix(tr.Get("traceparent").Str, "00-"+id+"-"+srv[0].SpanContext.SpanID().String()) {
		t.Errorf("trace's traceparent %q", tr.Get("traceparent").Str)
	}
	// Content opted in: the client's messages and the answer on the server span,
	// the call's own (with the injected knowledge) on the call span.
	in := gjson.Parse(attrString(srv[0], "gen_ai.input.messages"))
	if in.Get("0.role").Str != "system" || !strings.Contains(in.Get("1.parts.0.content").Str, "分析这局录像") {
		t.Errorf("server span gen_ai.input.messages: %s", in.Raw)
	}
	out := gjson.Parse(attrString(srv[0], "gen_ai.output.messages"))
	if out.Get("0.role").Str != "assistant" || !strings.Contains(out.Get("0.parts.0.content").Str, "对局概览") || out.Get("0.finish_reason").Str != "stop" {
		t.Errorf("server span gen_ai.output.messages: %s", out.Raw)
	}
	calls := byName(spans, "chat deepseek-chat")
	if len(calls) != 1 || !gjson.Valid(attrString(calls[0], "gen_ai.output.messages")) || attrString(calls[0], "gen_ai.input.messages") == "" {
		t.Errorf("the draft's call span carries no content: %v", calls)
	}
}

func TestTelemetryRelayedStreamAndFallback(t *testing.T) {
	t.Parallel()
	const config = `
upstreams:
  down: {base_url: "http://127.0.0.1:1", connect_timeout: 200ms}
  mock: {base_url: "%MOCK%", read_timeout: 5s}
routes:
  - name: relay
    models: [relay-model]
    upstreams: [{name: down}, {name: mock}]
telemetry: {enabled: true}
`
	h, exp := tracedHarness(t, "", config)
	status, hdr, body := h.post(t, "/v1/chat/completions",
		`{"model":"relay-model","stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`,
		"traceparent", "00-"+clientTraceID+"-00f067aa0ba902b7-01")
	if status != 200 || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("status %d: %s", status, body)
	}
	if hdr.Get(HeaderUpstream) != "mock" {
		t.Fatalf("served by %q, want the fallback", hdr.Get(HeaderUpstream))
	}
	spans := spansOf(t, h, exp, clientTraceID)
	calls := byName(spans, "chat relay-model")
	if len(calls) != 1 {
		t.Fatalf("call spans %v", names(spans))
	}
	c := calls[0]
	for key, want := range map[string]string{"factgate.call.kind": "relay", "gen_ai.request.temperature": "0.2", "gen_ai.request.max_tokens": "50",
		"gen_ai.response.finish_reasons": `["stop"]`} {
		if got := attrString(c, key); got != want {
			t.Errorf("relayed call %s = %q, want %q", key, got, want)
		}
	}
	if attrString(c, "gen_ai.usage.output_tokens") == "" || attrString(c, "gen_ai.response.id") == "" {
		t.Errorf("the stream's usage and id are not on the call span: %v", c.Attributes)
	}
	// The unreachable upstream is tried (and retried: nothing was sent), then the
	// fallback answers.
	tries := children(spans, c)
	var failed []tracetest.SpanStub
	var fallback tracetest.SpanStub
	for _, s := range tries {
		switch attrString(s, "factgate.upstream.name") {
		case "down":
			failed = append(failed, s)
			if attrString(s, "error.type") != "connect_error" {
				t.Errorf("failed try %v", s.Attributes)
			}
		case "mock":
			fallback = s
		}
	}
	if len(failed) == 0 || len(tries) != len(failed)+1 {
		t.Fatalf("tries %v, want the failed connects and the fallback", names(tries))
	}
	if attrString(fallback, "factgate.upstream.fallback") != "true" || attrString(fallback, "http.request.resend_count") != strconv.Itoa(len(failed)) ||
		attrString(fallback, "http.response.status_code") != "200" {
		t.Errorf("fallback try %v", fallback.Attributes)
	}
	if !strings.Contains(h.mock.Requests()[0].Header.Get("Traceparent"), fallback.SpanContext.SpanID().String()) {
		t.Errorf("the upstream's traceparent %q is not the fallback try's", h.mock.Requests()[0].Header.Get("Traceparent"))
	}
}

func TestTelemetryOffPassesTheClientsTraceparentThrough(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", "")
	tp := "00-" + clientTraceID + "-00f067aa0ba902b7-01"
	status, hdr, _ := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"hi"}]}`, "traceparent", tp)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	if h.srv.tel != nil {
		t.Fatal("tracing is on without the telemetry block")
	}
	_, _ = h.mock.WaitFor(1, time.Second)
	if got := h.mock.Requests()[0].Header.Get("Traceparent"); got != tp {
		t.Errorf("upstream traceparent %q, want the client's as it was", got)
	}
	_ = hdr
	_ = http.StatusOK
}

// Shutdown exports the spans still queued, after the requests finished: a
// deploy loses none of them.
func TestTelemetryShutdownExportsTheQueuedSpans(t *testing.T) {
	t.Parallel()
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	h := newHarness(t, "", baseConfig+"telemetry: {enabled: true}\n", WithTelemetry(telemetry.WithExporter(exp),
		// The schedule alone would export them in an hour.
		telemetry.WithBatching(telemetry.Batching{QueueSize: 1024, BatchSize: 512, Delay: time.Hour, ExportTimeout: time.Second})))
	for range 3 {
		if status, _, body := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"hi"}]}`); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans exported before the shutdown", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(byName(exp.GetSpans(), "POST /v1/chat/completions")); n != 3 {
		t.Errorf("%d server spans exported at shutdown, want 3", n)
	}
}

// keptSpans is the in-memory exporter without its Shutdown, which forgets them.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// A semantic validator's judge call is a call span of kind judge under the
// validation that made it.
func TestTelemetryJudgeCallUnderItsValidation(t *testing.T) {
	t.Parallel()
	draft := sceneJSON("combat", "Goblin ambush at the wagon")
	script := dndScript(answerJSON{Content: draft, Usage: draftUsage},
		judgeRule("combat", answerJSON{Content: verdict("approved", "Initiative is rolled and attacks are resolved."), Usage: judgeUsage}))
	h, exp := tracedHarness(t, script, dndRouteConfig("{validators: [combat]}", "", "")+"telemetry: {enabled: true}\n")
	got := sceneViaGoOpenAI(t, h, ambushChunk, false)
	spans := spansOf(t, h, exp, got.header.Get("X-Factgate-Trace-Id"))
	var judge, draftCall tracetest.SpanStub
	for _, s := range spans {
		switch attrString(s, "factgate.call.kind") {
		case "judge":
			judge = s
		case "draft":
			draftCall = s
		}
	}
	if judge.Name == "" || draftCall.Name == "" {
		t.Fatalf("spans %v: want a draft and a judge call", names(spans))
	}
	validate := byName(spans, "factgate.validate")
	if len(validate) != 1 || judge.Parent.SpanID() != validate[0].SpanContext.SpanID() {
		t.Errorf("the judge call is not under the draft's validation: %v", names(spans))
	}
	if attrString(judge, "gen_ai.request.temperature") == "" || attrString(judge, "gen_ai.output.type") != "json" {
		t.Errorf("judge call attributes %v", judge.Attributes)
	}
}
