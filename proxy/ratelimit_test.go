package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// withClock fixes the server's clock (the rate limit windows).
func withClock(now func() time.Time) Option {
	return func(s *Server) error { s.now = now; return nil }
}

// rateClock is half a minute into a window, so the window cannot end during a test.
var rateClock = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC) }

func init() {
	os.Setenv("FACTGATE_KEY_RES_RL_APP", "fg-rl-app")
	os.Setenv("FACTGATE_KEY_RES_RL_METERED", "fg-rl-metered")
	os.Setenv("FACTGATE_KEY_RES_RL_FREE", "fg-rl-free")
}

// rateLimitConfig: app may make 4 requests a minute (the default), metered may
// spend 100 tokens, free is unlimited. %CACHE% is the cache block.
const rateLimitConfig = `
auth:
  mode: keys
  rate_limit: {requests_per_minute: 4}
  keys:
    - {name: app, key_env: FACTGATE_KEY_RES_RL_APP}
    - {name: metered, key_env: FACTGATE_KEY_RES_RL_METERED, rate_limit: {requests_per_minute: 0, tokens_per_minute: 100}}
    - {name: free, key_env: FACTGATE_KEY_RES_RL_FREE, rate_limit: {requests_per_minute: 0}}
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - {name: plain, models: [alias], upstream: mock}
  - {name: held, models: [held], upstream: mock}
  - {name: default, default: true, upstream: mock}
%CACHE%
`

// rateLimitScript answers 60 tokens, with the provider's own rate limit headers
// (its key's quota), which a limited client must not see.
const rateLimitScript = `
default:
  content: counted
  usage: {prompt_tokens: 40, completion_tokens: 20}
  headers: {x-ratelimit-limit-requests: "10000", x-ratelimit-remaining-requests: "9999", x-ratelimit-reset-requests: "6ms"}
`

func newRateLimitHarness(t *testing.T, cacheBlock string) *harness {
	t.Helper()
	return newHarness(t, rateLimitScript, strings.ReplaceAll(rateLimitConfig, "%CACHE%", cacheBlock), WithChain("held", holdChain{}), withClock(rateClock))
}

// ask sends a chat completion (or, for model "", GET /v1/models) with a client key.
func ask(t *testing.T, h *harness, key, model string, stream bool) (int, http.Header, []byte) {
	t.Helper()
	if model == "" {
		req, _ := http.NewRequest("GET", h.base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"stream_options":{"include_usage":%v},"messages":[{"role":"user","content":"q"}]}`, model, stream, stream)
	if !stream {
		body = fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"q"}]}`, model)
	}
	return h.post(t, "/v1/chat/completions", body, "Authorization", "Bearer "+key)
}

// TestTwoReplicasSharingRedisEnforceOneRateLimit: two proxies on one Redis count a
// key's requests and tokens together, and answer as OpenAI does when the minute
// is spent: 429 rate_limit_exceeded of type requests or tokens, Retry-After and
// the x-ratelimit-* headers of the client's own limit.
func TestTwoReplicasSharingRedisEnforceOneRateLimit(t *testing.T) {
	t.Parallel()
	url, prefix, _ := abRedis(t)
	block := fmt.Sprintf("cache:\n  redis: {url: %q, key_prefix: %q}\n", url, prefix)
	a, b := newRateLimitHarness(t, block), newRateLimitHarness(t, block)

	// Requests: 4 a minute over both replicas, chat and other paths alike.
	for i, rep := range []*harness{a, b, a, b} {
		model := []string{"alias", "held", "", "alias"}[i]
		status, hdr, body := ask(t, rep, "fg-rl-app", model, false)
		if status != 200 {
			t.Fatalf("request %d: %d %s", i+1, status, body)
		}
		if hdr.Get("x-ratelimit-limit-requests") != "4" || hdr.Get("x-ratelimit-remaining-requests") != fmt.Sprint(3-i) || hdr.Get("x-ratelimit-reset-requests") != "30s" {
			t.Errorf("request %d: x-ratelimit limit %q remaining %q reset %q, want 4, %d, 30s (the client's own limit)", i+1,
				hdr.Get("x-ratelimit-limit-requests"), hdr.Get("x-ratelimit-remaining-requests"), hdr.Get("x-ratelimit-reset-requests"), 3-i)
		}
	}
	for _, rep := range []*harness{a, b} {
		status, hdr, body := ask(t, rep, "fg-rl-app", "alias", false)
		if status != 429 || gjson.GetBytes(body, "error.code").Str != "rate_limit_exceeded" || gjson.GetBytes(body, "error.type").Str != "requests" ||
			!strings.Contains(gjson.GetBytes(body, "error.message").Str, "requests per min (RPM): Limit 4") {
			t.Fatalf("the fifth request: %d %s, want 429 rate_limit_exceeded of type requests", status, body)
		}
		if hdr.Get("Retry-After") != "30" || hdr.Get("x-ratelimit-remaining-requests") != "0" || hdr.Get("x-ratelimit-reset-requests") != "30s" {
			t.Errorf("429 headers: Retry-After %q remaining %q reset %q", hdr.Get("Retry-After"), hdr.Get("x-ratelimit-remaining-requests"), hdr.Get("x-ratelimit-reset-requests"))
		}
	}
	if calls := len(a.mock.Requests()) + len(b.mock.Requests()); calls != 4 {
		t.Errorf("the upstreams got %d calls, want the 4 admitted", calls)
	}

	// Tokens: 100 a minute; each answer uses 60, counted after the fact —
	// a held answer (its usage summed) on one replica, a stream's usage chunk on
	// the other.
	for i, tc := range []struct {
		rep    *harness
		model  string
		stream bool
	}{{a, "held", false}, {b, "alias", true}} {
		status, hdr, body := ask(t, tc.rep, "fg-rl-metered", tc.model, tc.stream)
		if status != 200 || hdr.Get("x-ratelimit-limit-tokens") != "100" || hdr.Get("x-ratelimit-limit-requests") != "" {
			t.Fatalf("metered request %d: %d limit-tokens %q limit-requests %q %s", i+1, status, hdr.Get("x-ratelimit-limit-tokens"), hdr.Get("x-ratelimit-limit-requests"), body)
		}
	}
	status, hdr, body := ask(t, a, "fg-rl-metered", "alias", false)
	if status != 429 || gjson.GetBytes(body, "error.type").Str != "tokens" || !strings.Contains(gjson.GetBytes(body, "error.message").Str, "Limit 100, Used 120") ||
		hdr.Get("x-ratelimit-remaining-tokens") != "0" {
		t.Fatalf("with 120 of 100 tokens spent: %d remaining %q %s, want 429 of type tokens", status, hdr.Get("x-ratelimit-remaining-tokens"), body)
	}

	// No limit: the provider's headers pass as they came.
	for range 6 {
		status, hdr, _ := ask(t, b, "fg-rl-free", "alias", false)
		if status != 200 || hdr.Get("x-ratelimit-limit-requests") != "10000" {
			t.Fatalf("unlimited key: %d limit %q", status, hdr.Get("x-ratelimit-limit-requests"))
		}
	}
	if n := metricValue(t, a, `factgate_rate_limited_total{client="app",limit="requests"}`); n != 1 {
		t.Errorf("replica a counted %v refusals of app, want 1", n)
	}
}

// TestRateLimitsFailOpenToEachReplicasOwnCount: with Redis unreachable the limit
// still holds per replica, counted in memory; nothing fails.
func TestRateLimitsFailOpenToEachReplicasOwnCount(t *testing.T) {
	t.Parallel()
	dead := strings.TrimSuffix(strings.TrimPrefix(closedPort(t), "http://"), "/v1")
	block := fmt.Sprintf("cache:\n  redis: {addrs: [%q], dial_timeout: 100ms}\n", dead)
	a, b := newRateLimitHarness(t, block), newRateLimitHarness(t, block)
	for _, rep := range []*harness{a, b} {
		for i := range 5 {
			status, _, body := ask(t, rep, "fg-rl-app", "alias", false)
			want := 200
			if i == 4 {
				want = 429
			}
			if status != want {
				t.Fatalf("request %d on one replica with Redis down: %d %s, want %d", i+1, status, body, want)
			}
		}
	}
}

// BenchmarkRateLimitAdmit measures counting one request of a limited key in the
// memory cache (what every request of a limited key pays, plus a Redis round
// trip when the cache has Redis).
func BenchmarkRateLimitAdmit(b *testing.B) {
	cfg, err := ParseConfig([]byte(strings.ReplaceAll(strings.ReplaceAll(rateLimitConfig, "%CACHE%", ""), "%MOCK%", "http://127.0.0.1:1/v1")), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Auth.Keys[0].RateLimit = &RateLimitConfig{RequestsPerMinute: new(int64(1 << 40))}
	s, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if w, e := s.limiter.admit("app", nil); w == nil || e != nil {
			b.Fatal(e)
		}
	}
}
