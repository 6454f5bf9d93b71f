package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func TestPassthroughKeepsUnknownFieldsAndKeyOrderByteIdentical(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", "")
	// Unusual key order, unknown fields, unicode escapes and odd spacing.
	body := `{"zeta":{"nested":[1,2,{"x":"\u00e9"}]},  "messages":[{"content":"hi","role":"user","vendor_ext":true}],"model":"some-model","top_k":  7}`
	status, _, _ := h.post(t, "/v1/chat/completions", body)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	if got := string(h.lastRequest(t).Body); got != body {
		t.Fatalf("upstream saw a different body:\n got %s\nwant %s", got, body)
	}
}

func TestAliasRewritesOnlyTheModel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", "")
	body := `{"messages":[{"role":"user","content":"hi"}],"model":"alias","x_unknown":{"a":1}}`
	status, _, resp := h.post(t, "/v1/chat/completions", body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, resp)
	}
	want := `{"messages":[{"role":"user","content":"hi"}],"model":"mock-upstream-model","x_unknown":{"a":1}}`
	if got := string(h.lastRequest(t).Body); got != want {
		t.Fatalf("upstream body:\n got %s\nwant %s", got, want)
	}
}

func TestUnknownResponseFieldsReachTheClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
default:
  content: "answer"
  extra: {provider_meta: {region: "eu"}, x_score: 0.5}
  headers: {x-request-id: "req-42"}
`, "")
	status, hdr, resp := h.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"}]}`)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	if gjson.GetBytes(resp, "provider_meta.region").Str != "eu" || gjson.GetBytes(resp, "x_score").Float() != 0.5 {
		t.Fatalf("unknown fields lost: %s", resp)
	}
	if hdr.Get("X-Request-Id") != "req-42" {
		t.Fatalf("upstream header lost: %v", hdr)
	}
	if hdr.Get("X-Factgate-Overhead") == "" {
		t.Fatal("no X-Factgate-Overhead header")
	}
}

// TestOtherPathsPassThroughWithMethodQueryHeadersAndBody: with a base URL
// without a path, a path outside /v1 (the mock's /echo) is forwarded as it is.
func TestOtherPathsPassThroughWithMethodQueryHeadersAndBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", strings.Replace(baseConfig, `base_url: "%MOCK%"`, `base_url: "%MOCKROOT%"`, 1))
	req, _ := http.NewRequest("PUT", h.base+"/echo/files?purpose=fine-tune&x=1", strings.NewReader("raw body \x00 bytes"))
	req.Header.Set("X-Custom", "kept")
	req.Header.Set("Connection", "keep-alive, X-Hop")
	req.Header.Set("X-Hop", "dropped")
	req.Header.Set("X-Factgate-Session", "never forwarded")
	req.Header.Set("Authorization", "Bearer client-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	rec := h.lastRequest(t)
	if rec.Method != "PUT" || rec.Path != "/echo/files" || rec.Query != "purpose=fine-tune&x=1" {
		t.Fatalf("upstream saw %s %s ? %s", rec.Method, rec.Path, rec.Query)
	}
	if string(rec.Body) != "raw body \x00 bytes" {
		t.Fatalf("body %q", rec.Body)
	}
	if rec.Header.Get("X-Custom") != "kept" || rec.Header.Get("Authorization") != "Bearer client-key" {
		t.Fatalf("end-to-end headers lost: %v", rec.Header)
	}
	for _, k := range []string{"X-Hop", "X-Factgate-Session"} {
		if rec.Header.Get(k) != "" {
			t.Fatalf("%s was forwarded: %v", k, rec.Header)
		}
	}
}

func TestModelsEndpointPassesThrough(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", "")
	resp, err := http.Get(h.base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || gjson.GetBytes(b, "data.0.id").Str == "" {
		t.Fatalf("status %d body %s", resp.StatusCode, b)
	}
}

func TestPassthroughStreamIsNotBuffered(t *testing.T) {
	t.Parallel()
	// Six events 150 ms apart: the last is sent ~750 ms after the first.
	h := newHarness(t, `
default:
  content: "abcdefghijklmnopqrst"
  chunk_size: 4
  chunk_delay: 150ms
`, "")
	req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	var first time.Time
	var content strings.Builder
	for {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "data: ") {
			if first.IsZero() {
				first = time.Now()
			}
			data := strings.TrimSpace(strings.TrimPrefix(line, "data: "))
			if data != "[DONE]" {
				content.WriteString(gjson.Get(data, "choices.0.delta.content").Str)
			}
		}
		if err != nil {
			break
		}
	}
	recs, err := h.mock.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Before(recs[0].Finished.Add(-300 * time.Millisecond)) {
		t.Fatalf("first event arrived at %v, upstream finished at %v: the stream was buffered", first, recs[0].Finished)
	}
	if content.String() != "abcdefghijklmnopqrst" {
		t.Fatalf("content %q", content.String())
	}
}

func TestProxyErrorsUseTheOpenAIEnvelope(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", "")
	tests := []struct {
		name   string
		body   string
		status int
		code   string
		msg    string
	}{
		{"malformed JSON", "{\"model\": \"m\",\n \"messages\": [}", 400, "invalid_json", "line 2, column"},
		{"no model", `{"messages":[{"role":"user","content":"q"}]}`, 400, "missing_model", "no model"},
		{"model not a string", `{"model":7}`, 400, "missing_model", "no model"},
		{"body over the limit", `{"model":"m","pad":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "request_too_large", "max_request_body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, resp := h.post(t, "/v1/chat/completions", tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, resp)
			}
			e := gjson.GetBytes(resp, "error")
			if e.Get("code").Str != tc.code || !strings.Contains(e.Get("message").Str, tc.msg) || !e.Get("type").Exists() || !e.Get("param").Exists() {
				t.Fatalf("envelope %s", resp)
			}
		})
	}
	// The proxy keeps serving afterwards.
	if status, _, _ := h.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"}]}`); status != 200 {
		t.Fatalf("after errors: status %d", status)
	}
}

func TestUnknownModelWithoutDefaultRouteIs404(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", `
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - {name: only, models: [known], upstream: mock}
`)
	status, _, resp := h.post(t, "/v1/chat/completions", `{"model":"unknown","messages":[{"role":"user","content":"q"}]}`)
	if status != 404 || gjson.GetBytes(resp, "error.code").Str != "model_not_found" || gjson.GetBytes(resp, "error.param").Str != "model" {
		t.Fatalf("status %d %s", status, resp)
	}
}

func TestUpstreamErrorsPassThroughUnchanged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
rules:
  - match: {model: rate-limited}
    answer:
      fault:
        status: 429
        body: '{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}'
        headers: {Retry-After: "60"}
  - match: {model: broken}
    answer:
      fault: {status: 500, body: "upstream exploded"}
`, "")
	// A 429 whose Retry-After is beyond retry.max_delay (8s) is not retried: the
	// client gets it as the provider sent it, at once.
	status, hdr, body := h.post(t, "/v1/chat/completions", `{"model":"rate-limited","messages":[{"role":"user","content":"q"}]}`)
	if status != 429 || hdr.Get("Retry-After") != "60" || string(body) != `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}` {
		t.Fatalf("429: %d %v %s", status, hdr, body)
	}
	if n := len(h.mock.Requests()); n != 1 {
		t.Fatalf("the mock saw %d requests, want 1", n)
	}
	status, _, body = h.post(t, "/v1/chat/completions", `{"model":"broken","messages":[{"role":"user","content":"q"}]}`)
	if status != 500 || string(body) != "upstream exploded" {
		t.Fatalf("500: %d %s", status, body)
	}
}

func TestUpstreamDownIs502AndSlowIs504(t *testing.T) {
	t.Parallel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	h := newHarness(t, `
default:
  content: late
  fault: {slow_first_byte: 3s}
`, `
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 300ms}
  dead: {base_url: "http://`+dead+`/v1", connect_timeout: 500ms}
routes:
  - {name: slow, models: [slow], upstream: mock}
  - {name: down, models: [down], upstream: dead}
`)
	status, _, body := h.post(t, "/v1/chat/completions", `{"model":"down","messages":[{"role":"user","content":"q"}]}`)
	if status != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_unreachable" {
		t.Fatalf("down: %d %s", status, body)
	}
	start := time.Now()
	status, _, body = h.post(t, "/v1/chat/completions", `{"model":"slow","messages":[{"role":"user","content":"q"}]}`)
	if status != 504 || gjson.GetBytes(body, "error.code").Str != "upstream_timeout" {
		t.Fatalf("slow: %d %s", status, body)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("the timeout took %v", time.Since(start))
	}
}

func TestMidStreamDisconnectReachesTheClientAsAnError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
rules:
  - match: {model: broken}
    answer:
      content: "one two three four five six"
      chunk_size: 3
      fault: {disconnect_after: 3}
`, "")
	resp, err := http.Post(h.base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"broken","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("the client read a clean end of a broken stream: %s", b)
	}
	if strings.Contains(string(b), "[DONE]") {
		t.Fatalf("a broken stream ended with [DONE]: %s", b)
	}
	if status, _, b2 := h.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"}]}`); status != 200 {
		t.Fatalf("proxy stopped serving: %d %s", status, b2)
	}
}

func TestMalformedUpstreamJSONPassesThroughOnPlainRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
default:
  fault: {malformed: true}
`, "")
	status, _, body := h.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"}]}`)
	if status != 200 || json.Valid(body) {
		t.Fatalf("want the upstream's invalid body unchanged, got %d %s", status, body)
	}
}

func TestClientDisconnectCancelsTheUpstreamRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
default:
  content: never
  fault: {slow_first_byte: 10s}
`, "")
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", h.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request should have been cancelled")
	}
	recs, err := h.mock.WaitFor(1, 3*time.Second)
	if err != nil {
		t.Fatalf("the upstream request was not cancelled: %v", err)
	}
	if !recs[0].Cancelled {
		t.Fatalf("the upstream request was not cancelled: %+v", recs[0])
	}
	if recs[0].Finished.Sub(recs[0].Started) > 3*time.Second {
		t.Fatalf("the upstream request ran %v", recs[0].Finished.Sub(recs[0].Started))
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(h.logs.String(), `"status":499`) {
		if time.Now().After(deadline) {
			t.Fatalf("no 499 logged:\n%s", h.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status, _, _ := h.post(t, "/v1/models", ``); status == 0 {
		t.Fatal("proxy stopped serving")
	}
}

func TestHealthReadyAndMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", "")
	h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"q"}]}`)
	for path, want := range map[string]string{
		"/healthz": `"ok"`,
		"/readyz":  `"ready"`,
		"/metrics": `factgate_requests_total{code="200",route="aliased"} 1`,
	} {
		resp, err := http.Get(h.base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d, want %s in:\n%.2000s", path, resp.StatusCode, want, b)
		}
	}
	resp, _ := http.Get(h.base + "/metrics")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"factgate_proxy_overhead_seconds_bucket", "factgate_upstream_duration_seconds_bucket", "factgate_in_flight_requests", "factgate_request_duration_seconds"} {
		if !strings.Contains(string(b), name) {
			t.Fatalf("metric %s missing", name)
		}
	}
}

func TestDebugBodiesAreRedacted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {content: "the secret answer"}`, `
log: {level: debug, debug_bodies: true}
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - {name: held, models: [held], upstream: mock}
  - {name: default, default: true, upstream: mock}
`, WithChain("held", holdChain{}))
	status, _, _ := h.post(t, "/v1/chat/completions", `{"model":"held","messages":[{"role":"user","content":"my private replay"}]}`, "Authorization", "Bearer sk-never-logged")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	logs := h.logs.String()
	for _, secret := range []string{"my private replay", "the secret answer", "sk-never-logged"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("%q reached the logs:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, "[redacted ") || !strings.Contains(logs, `request body`) || !strings.Contains(logs, `response body`) {
		t.Fatalf("no redacted bodies logged:\n%s", logs)
	}
}

func TestHeadersTheUpstreamDeclaresHopByHopAreDropped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
default:
  content: "answer"
  headers: {Connection: "X-Internal-Hop", X-Internal-Hop: "upstream only", X-Public: "kept"}
`, clientConfig, WithChain("held", holdChain{}))
	for _, model := range []string{"alias", "held"} {
		status, hdr, _ := h.post(t, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"q"}]}`)
		if status != 200 || hdr.Get("X-Public") != "kept" || hdr.Get("X-Internal-Hop") != "" {
			t.Fatalf("%s: %d %v", model, status, hdr)
		}
	}
}
