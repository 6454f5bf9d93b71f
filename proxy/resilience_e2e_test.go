package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// Provider resilience end to end (issue 15): retries, fallbacks, the circuit
// breaker and key pools, against the mock upstream.

// metricValue reads one sample of the proxy's /metrics ("name{labels}"), 0 when
// absent.
func metricValue(t *testing.T, h *harness, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(metricsText(t, h), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// closedPort is the base URL of a port nothing listens on: connections to it are
// refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

const rateLimitedOnce = `
rules:
  - match: {last_user: "^wait"}
    answers:
      - fault:
          status: 429
          headers: {Retry-After: "1"}
          body: '{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}'
      - content: worth the wait
`

// TestA429ThenA200ReachesTheClientAs200AfterTheWait: the provider answers 429 with
// Retry-After: 1, then 200. The client gets the 200 — on a pass-through route and
// on a held one, streamed or not — and the mock saw the second request at least
// the second the provider asked for after the first.
func TestA429ThenA200ReachesTheClientAs200AfterTheWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, model string
		stream      bool
	}{
		{"pass-through", "alias", false},
		{"pass-through stream", "alias", true},
		{"held", "held", false},
		{"held stream", "held", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, rateLimitedOnce, clientConfig, WithChain("held", holdChain{}))
			body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"wait for it"}]}`, tc.model, tc.stream)
			status, hdr, resp := h.post(t, "/v1/chat/completions", body)
			if status != 200 || (answerText(resp) != "worth the wait") {
				t.Fatalf("the client got %d %s, want the 200 that followed the 429", status, resp)
			}
			recs, err := h.mock.WaitFor(2, 10*time.Second)
			if err != nil || len(recs) != 2 {
				t.Fatalf("the mock saw %d requests (%v), want the 429 and its retry", len(recs), err)
			}
			gap := recs[1].Started.Sub(recs[0].Finished)
			if recs[0].Status != 429 || recs[1].Status != 200 || gap < time.Second || gap > 8*time.Second {
				t.Fatalf("the mock answered %d then %d, %s apart: want 429 then 200 at least Retry-After (1s) apart", recs[0].Status, recs[1].Status, gap)
			}
			t.Logf("the retry came %s after the 429", gap.Round(time.Millisecond))
			if hdr.Get(HeaderUpstream) != "mock" && !strings.Contains(string(resp), ": X-Factgate-Upstream: mock") {
				t.Errorf("the answer does not say which upstream served it: %v", hdr)
			}
			if n := metricValue(t, h, `factgate_upstream_attempts_total{outcome="rate_limited",upstream="mock"}`); n != 1 {
				t.Errorf("factgate_upstream_attempts_total rate_limited = %v, want 1", n)
			}
			if tc.model != "held" {
				return
			}
			tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
			attempts := tr.Get("upstream_attempts").Array()
			if len(attempts) != 2 || attempts[0].Get("outcome").Str != "rate_limited" || attempts[0].Get("status").Int() != 429 ||
				attempts[1].Get("outcome").Str != "ok" || attempts[1].Get("wait").Float() < 1000 || tr.Get("upstream").Str != "mock" {
				t.Errorf("trace upstream %q, attempts %s: want rate_limited (429), then ok after a wait of at least 1000 ms", tr.Get("upstream").Str, tr.Get("upstream_attempts").Raw)
			}
		})
	}
}

// fallbackConfig routes everything to a dead upstream first, then the mock.
const fallbackConfig = `
upstreams:
  dead: {base_url: "%DEAD%", retry: {base_delay: 5ms}, breaker: {failures: 3, cooldown: 10m}}
  mock: {base_url: "%MOCK%"}
routes:
  - name: plain
    models: [alias]
    upstreams: [{name: dead, upstream_model: dead-model}, {name: mock, upstream_model: fallback-model}]
  - name: held
    models: [held]
    upstreams: [{name: dead, upstream_model: dead-model}, {name: mock, upstream_model: fallback-model}]
  - {name: default, default: true, upstreams: [dead, mock]}
`

// TestARefusedPrimaryFallsBackAndAnOpenCircuitSkipsIt: the primary refuses
// connections. The first request spends its retries on it and the fallback answers
// (with the fallback's model, without the client's credentials); that opens the
// primary's circuit, and from then on the fallback answers without a call to the
// primary — chat, held and other paths alike.
func TestARefusedPrimaryFallsBackAndAnOpenCircuitSkipsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", strings.ReplaceAll(fallbackConfig, "%DEAD%", closedPort(t)), WithChain("held", holdChain{}))
	status, hdr, body := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"q"}]}`)
	if status != 200 || hdr.Get(HeaderUpstream) != "mock" {
		t.Fatalf("first request: %d from %q: %s; want 200 from the fallback", status, hdr.Get(HeaderUpstream), body)
	}
	rec := h.lastRequest(t)
	if m := gjson.GetBytes(rec.Body, "model").Str; m != "fallback-model" {
		t.Errorf("the fallback got model %q, want its own upstream_model fallback-model", m)
	}
	if a := rec.Header.Get("Authorization"); a != "" {
		t.Errorf("the fallback got Authorization %q: the client's credentials belong to the first upstream", a)
	}
	if n := metricValue(t, h, `factgate_upstream_attempts_total{outcome="connect_error",upstream="dead"}`); n != 3 {
		t.Errorf("connect errors on the primary = %v, want 3 (the call and its 2 retries)", n)
	}
	if open := metricValue(t, h, `factgate_upstream_circuit_open{upstream="dead"}`); open != 1 {
		t.Fatalf("the primary's circuit is not open after 3 failures (gauge %v)", open)
	}

	// With the circuit open, the primary costs nothing.
	const n = 20
	var took []time.Duration
	for i := range n {
		model := []string{"alias", "held"}[i%2]
		start := time.Now()
		status, hdr, body := h.post(t, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"q"}]}`)
		took = append(took, time.Since(start))
		if status != 200 || hdr.Get(HeaderUpstream) != "mock" {
			t.Fatalf("request %d (%s): %d from %q: %s", i, model, status, hdr.Get(HeaderUpstream), body)
		}
		if model == "held" && i == 1 {
			tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
			a := tr.Get("upstream_attempts").Array()
			if len(a) != 2 || a[0].Get("upstream").Str != "dead" || a[0].Get("outcome").Str != "circuit_open" || a[0].Get("duration").Float() != 0 ||
				a[1].Get("upstream").Str != "mock" || a[1].Get("outcome").Str != "ok" || tr.Get("upstream").Str != "mock" {
				t.Errorf("held request's trace: upstream %q, attempts %s; want dead skipped (circuit_open), mock ok", tr.Get("upstream").Str, tr.Get("upstream_attempts").Raw)
			}
		}
	}
	resp, err := http.Get(h.base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(HeaderUpstream) != "mock" {
		t.Errorf("GET /v1/models: %d from %q, want the fallback's list", resp.StatusCode, resp.Header.Get(HeaderUpstream))
	}
	if c := metricValue(t, h, `factgate_upstream_attempts_total{outcome="connect_error",upstream="dead"}`); c != 3 {
		t.Errorf("connect errors on the primary went from 3 to %v while its circuit was open", c)
	}
	if skipped := metricValue(t, h, `factgate_upstream_attempts_total{outcome="circuit_open",upstream="dead"}`); skipped != n+1 {
		t.Errorf("skipped calls to the primary = %v, want %d", skipped, n+1)
	}
	slices.Sort(took)
	t.Logf("with the primary's circuit open, %d requests answered by the fallback: median %s, max %s (whole round trip through the proxy)",
		n, took[n/2].Round(10*time.Microsecond), took[n-1].Round(10*time.Microsecond))
	// The figure is 50 ms; a loaded 2-core CI machine gets a generous bound.
	if took[n/2] > time.Second {
		t.Errorf("median latency with the circuit open is %s", took[n/2])
	}
}

// TestAnAnswerTheClientStartedReadingIsNeverRetried: a stream that breaks after
// its first events reaches the client broken — it is never sent again (the client
// already has part of it, and the provider billed it); nor is a request the
// upstream dropped after reading it.
func TestAnAnswerTheClientStartedReadingIsNeverRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fault string
		stream      bool
		status      int
	}{
		{"a stream broken after its first events", "{disconnect_after: 3}", true, 200},
		{"a connection dropped after the request was sent", "{drop: true}", false, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, `
rules:
  - match: {last_user: "^break"}
    answers:
      - {content: "a long answer cut in the middle of its stream", chunk_size: 4, fault: `+tc.fault+`}
      - {content: "a second answer nobody should ask for"}
`, clientConfig)
			req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions",
				strings.NewReader(`{"model":"alias","stream":`+strconv.FormatBool(tc.stream)+`,"messages":[{"role":"user","content":"break it"}]}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, got, tc.status)
			}
			if tc.stream && (rerr == nil || !strings.HasPrefix(answerText(got), "a long") || strings.Contains(string(got), "[DONE]")) {
				t.Fatalf("the client read %q (error %v): want the first events, then a broken stream", got, rerr)
			}
			// The proxy logs the request when it is over: any retry would have
			// reached the mock before. The mock records a request when its
			// handler returns, which may be after the proxy saw the drop: wait for
			// the first to be recorded, and count arrivals, not records.
			waitForLog(t, h, `"status":502`)
			if _, err := h.mock.WaitFor(1, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if h.mock.WaitForStarted(2, time.Millisecond) == nil {
				t.Fatalf("a second request reached the mock: the answer was sent again")
			}
		})
	}
}

// poolConfig is auth mode keys with a pool of two provider keys.
const poolConfig = `
auth:
  mode: keys
  keys: [{name: app, key_env: FACTGATE_KEY_RES_POOL_APP}]
upstreams:
  mock:
    base_url: "%MOCK%"
    api_key_envs: [{env: FACTGATE_RES_POOL_K1, weight: 1000}, FACTGATE_RES_POOL_K2]
routes:
  - {name: plain, models: [alias], upstream: mock}
  - {name: held, models: [held], upstream: mock}
`

func init() {
	os.Setenv("FACTGATE_KEY_RES_POOL_APP", "fg-pool-app")
	os.Setenv("FACTGATE_RES_POOL_K1", "sk-pool-first")
	os.Setenv("FACTGATE_RES_POOL_K2", "sk-pool-second")
}

// TestAPoolKeyThatIsRefusedCoolsDownWhileTheOthersCarryOn: the heavier key
// answers 429 (Retry-After 30) or 401; it is used once, then left out while the
// other serves every request. Traces, metrics and logs name keys by their
// environment variable, never by value. When every key cools, the upstream is
// unavailable (503 with Retry-After) rather than called.
func TestAPoolKeyThatIsRefusedCoolsDownWhileTheOthersCarryOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fault string
	}{
		{"429", `{status: 429, headers: {Retry-After: "30"}, body: '{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}'}`},
		{"401", `{status: 401, body: '{"error":{"message":"bad key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}'}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, `
rules:
  - match: {header: {Authorization: "sk-pool-first"}}
    answer: {fault: `+tc.fault+`}
  - match: {last_user: "^all", header: {Authorization: "sk-pool-second"}}
    answer: {fault: {status: 429, headers: {Retry-After: "30"}}}
`, poolConfig, WithChain("held", holdChain{}))
			var traceID string
			for i := range 10 {
				model := []string{"alias", "held"}[i%2]
				status, hdr, body := h.post(t, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"q"}]}`, "Authorization", "Bearer fg-pool-app")
				if status != 200 {
					t.Fatalf("request %d: %d %s, want 200 from the other key", i, status, body)
				}
				if model == "held" && traceID == "" {
					traceID = hdr.Get("X-Factgate-Trace-Id")
				}
			}
			used := map[string]int{}
			for _, r := range h.mock.Requests() {
				used[r.Header.Get("Authorization")]++
			}
			if used["Bearer sk-pool-first"] != 1 || used["Bearer sk-pool-second"] != 10 {
				t.Fatalf("keys used %v: want the refused key once, the other for all 10 requests", used)
			}
			if n := metricValue(t, h, `factgate_upstream_key_cooldowns_total{key="FACTGATE_RES_POOL_K1",upstream="mock"}`); n != 1 {
				t.Errorf("key cooldowns = %v, want 1", n)
			}
			tr := string(storedTrace(t, h.base, traceID, "Bearer fg-pool-app"))
			if strings.Contains(tr, "sk-pool") || !strings.Contains(tr, `"key":"FACTGATE_RES_POOL_K2"`) {
				t.Errorf("the trace must name keys by their variable, never by value: %s", tr)
			}
			if logs := h.logs.String(); strings.Contains(logs, "sk-pool") || strings.Contains(metricsText(t, h), "sk-pool") {
				t.Errorf("a key's value reached the logs or the metrics")
			}
			// Now the second key is refused too: that request gets the provider's
			// 429; the next finds every key cooling and gets a 503 at once.
			status, _, body := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"all keys"}]}`, "Authorization", "Bearer fg-pool-app")
			if status != 429 {
				t.Fatalf("with both keys refused: %d %s, want the provider's 429", status, body)
			}
			before := len(h.mock.Requests())
			status, hdr, body := h.post(t, "/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"all keys"}]}`, "Authorization", "Bearer fg-pool-app")
			ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
			if status != 503 || gjson.GetBytes(body, "error.code").Str != "upstream_unavailable" || ra < 1 || ra > 30 || len(h.mock.Requests()) != before {
				t.Fatalf("with every key cooling: %d Retry-After %q %s (mock calls %d -> %d), want 503 upstream_unavailable without a call",
					status, hdr.Get("Retry-After"), body, before, len(h.mock.Requests()))
			}
		})
	}
}

// TestHiddenRevisionsSurviveA30PercentRateOf429s: the provider rate-limits 30% of
// the calls (seeded, so the same ones every run). Every draft and every hidden
// revision still succeeds: the client gets the corrected answer each time.
func TestHiddenRevisionsSurviveA30PercentRateOf429s(t *testing.T) {
	t.Parallel()
	fault := `{rate: 0.3, seed: 9, answer: {fault: {status: 429, headers: {retry-after-ms: "5"}, body: '{"error":{"message":"slow down","type":"tokens","param":null,"code":"rate_limit_exceeded"}}'}}}`
	script := fmt.Sprintf(`
rules:
  - name: revision
    match: {has_assistant: true}
    random_fault: %s
    answer: {content: %q}
  - name: draft
    match: {has_assistant: false}
    random_fault: %s
    answer: {content: %q}
`, fault, storyFixedAnswer, fault, storyDraftAnswer)
	h := newHarness(t, script, reviseRouteConfig("never", ""))
	const n = 20
	for i := range n {
		status, hdr, body := h.post(t, "/v1/chat/completions", storyRequest(false))
		if status != 200 || gjson.GetBytes(body, "choices.0.message.content").Str != storyFixedAnswer {
			t.Fatalf("request %d: %d %.300s: want the revised answer", i, status, body)
		}
		if hdr.Get("X-Factgate-Revisions") != "1" {
			t.Fatalf("request %d: X-Factgate-Revisions %q", i, hdr.Get("X-Factgate-Revisions"))
		}
	}
	limited := 0
	for _, r := range h.mock.Requests() {
		if r.Status == 429 {
			limited++
		}
	}
	if limited < 8 {
		t.Fatalf("only %d of %d calls were rate-limited: the fault did not bite", limited, len(h.mock.Requests()))
	}
	t.Logf("%d requests, %d upstream calls, %d of them answered 429: every draft and revision succeeded", n, len(h.mock.Requests()), limited)
}

// TestARetryNeverOutlastsTheRevisionBudget: a revision answered 429 with a
// Retry-After longer than what is left of the budget is not waited for: the
// client gets the downgraded draft within the budget.
func TestARetryNeverOutlastsTheRevisionBudget(t *testing.T) {
	t.Parallel()
	script := fmt.Sprintf(`
rules:
  - match: {has_assistant: true}
    answer: {fault: {status: 429, headers: {Retry-After: "5"}}}
default: {content: %q}
`, storyDraftAnswer)
	h := newHarness(t, script, reviseRouteConfig("never", "{budget: 1s}"))
	start := time.Now()
	status, hdr, body := h.post(t, "/v1/chat/completions", storyRequest(false))
	took := time.Since(start)
	if status != 200 || took > 4*time.Second {
		t.Fatalf("%d after %s: %.200s; want the downgraded draft within the 1s budget", status, took, body)
	}
	tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
	if got := tr.Get("final.outcome").Str; got != "failed" || !strings.Contains(tr.Get("notes").Raw, "status 429") {
		t.Errorf("outcome %q, notes %s: want the revision failed on its 429 and the draft downgraded", got, tr.Get("notes").Raw)
	}
	if n := len(h.mock.Requests()); n != 2 {
		t.Errorf("the mock saw %d calls, want the draft and one revision (no retry inside a 1s budget for a 5s wait)", n)
	}
}

// answerText is the content of a chat completion, or of the chunks of a stream
// (as far as it goes).
func answerText(body []byte) string {
	if gjson.ValidBytes(body) {
		return gjson.GetBytes(body, "choices.0.message.content").Str
	}
	var b strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			b.WriteString(gjson.Get(data, "choices.0.delta.content").Str)
		}
	}
	return b.String()
}
