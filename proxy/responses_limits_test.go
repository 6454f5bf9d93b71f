package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// responsesLimitConfig: the rate limit keys of rateLimitConfig in front of a
// Responses-capable upstream (the request is forwarded, its stream relayed as it
// arrives) and a chat-only one (translated and held).
const responsesLimitConfig = `
auth:
  mode: keys
  rate_limit: {requests_per_minute: 4}
  keys:
    - {name: app, key_env: FACTGATE_KEY_RES_RL_APP}
    - {name: metered, key_env: FACTGATE_KEY_RES_RL_METERED, rate_limit: {requests_per_minute: 0, tokens_per_minute: 100}}
upstreams:
  respup: {base_url: "%MOCK%", api: responses}
  chatup: {base_url: "%MOCK%"}
routes:
  - {name: plain-r, models: [plain-r], upstream: respup}
  - {name: plain-c, models: [plain-c], upstream: chatup}
`

// TestResponsesRequestsCountAgainstTheClientsLimits: POST /v1/responses is
// admitted like a chat completion — a proxy-issued key, the client's requests per
// minute — and its answers' tokens count against the client's tokens per minute,
// a stream relayed from a Responses upstream too (its usage is in
// response.completed, not in a top-level usage).
func TestResponsesRequestsCountAgainstTheClientsLimits(t *testing.T) {
	t.Parallel()
	ask := func(h *harness, key, model string, stream bool) (int, []byte) {
		body := fmt.Sprintf(`{"model":%q,"stream":%v,"input":"q"}`, model, stream)
		status, _, raw := h.post(t, "/v1/responses", body, "Authorization", "Bearer "+key)
		return status, raw
	}
	t.Run("keys and requests per minute", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, rateLimitScript, responsesLimitConfig, withClock(rateClock))
		if status, raw := ask(h, "not-a-key", "plain-r", false); status != 401 {
			t.Errorf("an unknown key: %d %s, want 401", status, raw)
		}
		for i, model := range []string{"plain-r", "plain-c", "plain-r", "plain-c"} {
			if status, raw := ask(h, "fg-rl-app", model, i%2 == 0); status != 200 {
				t.Fatalf("request %d: %d %s", i+1, status, raw)
			}
		}
		status, raw := ask(h, "fg-rl-app", "plain-r", false)
		if status != 429 || gjson.GetBytes(raw, "error.type").Str != "requests" {
			t.Errorf("the fifth request of a 4-a-minute key: %d %s, want 429 of type requests", status, raw)
		}
	})
	for _, tc := range []struct {
		name   string
		model  string
		stream bool
	}{
		{"a stream relayed from a Responses upstream", "plain-r", true},
		{"an answer forwarded from a Responses upstream", "plain-r", false},
		{"a stream translated from a chat upstream", "plain-c", true},
	} {
		t.Run("tokens: "+tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, rateLimitScript, responsesLimitConfig, withClock(rateClock))
			// Each answer uses 60 tokens: two spend 120 of the 100.
			for i := range 2 {
				status, raw := ask(h, "fg-rl-metered", tc.model, tc.stream)
				if status != 200 {
					t.Fatalf("metered request %d: %d %s", i+1, status, raw)
				}
				if tc.stream && !strings.Contains(string(raw), `"total_tokens":60`) {
					t.Fatalf("the stream does not tell its usage: %s", raw)
				}
			}
			status, raw := ask(h, "fg-rl-metered", tc.model, tc.stream)
			if status != 429 || gjson.GetBytes(raw, "error.type").Str != "tokens" || !strings.Contains(gjson.GetBytes(raw, "error.message").Str, "Used 120") {
				t.Errorf("with 120 of 100 tokens spent: %d %s, want 429 of type tokens", status, raw)
			}
		})
	}
}

// TestUsageScannerReadsAResponsesTerminalEvent: the usage of a Responses stream is
// in its terminal event's response, which echoes the whole output and the
// instructions before it — longer than the line the scanner keeps whole.
func TestUsageScannerReadsAResponsesTerminalEvent(t *testing.T) {
	t.Parallel()
	mention := `the answer quotes \"total_tokens\":7 in its text. `
	for _, tc := range []struct {
		name, text string
		want       int
	}{
		{"short", "counted", 60},
		{"over the kept line", strings.Repeat(mention, 3000), 60},
	} {
		event := `data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","instructions":` +
			fmt.Sprintf("%q", tc.text) + `,"output":[{"type":"message","content":[{"type":"output_text","text":` + fmt.Sprintf("%q", tc.text) +
			`}]}],"usage":{"input_tokens":40,"output_tokens":20,"total_tokens":60},"user":null,"metadata":{"total_tokens":"x"}}}` + "\n\n"
		stream := `data: {"type":"response.created","sequence_number":0,"response":{"usage":null}}` + "\n\n" + event
		for _, piece := range []int{1 << 20, 4096, 7} {
			var got []int
			u := &usageScanner{spend: func(n int) { got = append(got, n) }}
			for b := []byte(stream); len(b) > 0; {
				n := min(piece, len(b))
				u.scan(b[:n])
				b = b[n:]
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("%s, %d-byte reads: spent %v, want [%d]", tc.name, piece, got, tc.want)
			}
		}
	}
}
