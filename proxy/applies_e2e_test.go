package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// greetingScript answers what is not an analysis.
const greetingScript = `
rules:
  - match: {response_format: json_object}
    answer: {content: '{"greeting":"你好"}'}
  - match: {response_format: json_schema}
    answer: {content: '{"greeting":"hi"}'}
default:
  content: Hello there!
  extra: {usage: {prompt_tokens: 24, completion_tokens: 4, total_tokens: 28, prompt_tokens_details: {cached_tokens: 16}}}
`

func TestHeldRouteForwardsWhatIsNotAnAnalysisUnchanged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, inject, body, want string
		knowledge                bool // the upstream saw the pack's knowledge
	}{
		{name: "say hello", body: `{"model":"ra3-analyst","messages":[{"role":"user","content":"Say hello"}],"temperature":0.5}`, want: "Hello there!"},
		{name: "JSON mode without a log", body: `{"model":"ra3-analyst","response_format":{"type":"json_object"},"messages":[{"role":"system","content":"Answer in JSON."},{"role":"user","content":"Greet me"}]}`, want: `{"greeting":"你好"}`},
		{name: "json_schema without a log", body: `{"model":"ra3-analyst","response_format":{"type":"json_schema","json_schema":{"name":"g","schema":{"type":"object"}}},"messages":[{"role":"user","content":"Greet me"}]}`, want: `{"greeting":"hi"}`},
		{name: "JSON mode on an analysis: knowledge, no contract", body: `{"model":"ra3-analyst","response_format":{"type":"json_object"},"messages":[{"role":"user","content":` + yamlString("以 JSON 给出结论。\n"+replayText) + `}]}`, want: `{"greeting":"你好"}`, knowledge: true},
		{name: "inject when always: knowledge, no contract", inject: "when: always", body: `{"model":"ra3-analyst","messages":[{"role":"user","content":"Say hello"}]}`, want: "Hello there!", knowledge: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, greetingScript, heldRouteConfig(tc.inject, ""))
			for _, stream := range []bool{false, true} {
				h.mock.Reset()
				body := tc.body
				if stream {
					body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
				}
				status, hdr, raw := h.post(t, "/v1/chat/completions", body)
				if status != 200 {
					t.Fatalf("stream=%v: %d %s", stream, status, raw)
				}
				content := gjson.GetBytes(raw, "choices.0.message.content").Str
				if stream {
					_, content, _ = readSSE(t, strings.NewReader(string(raw)))
				}
				if content != tc.want {
					t.Errorf("stream=%v: content %q, want %q byte for byte", stream, content, tc.want)
				}
				if r := hdr.Get("X-Factgate-Revisions"); r != "" && r != "0" {
					t.Errorf("stream=%v: X-Factgate-Revisions %q: a hidden call for a request that is not an analysis", stream, r)
				}
				if _, err := h.mock.WaitFor(1, 3*time.Second); err != nil {
					t.Fatal(err)
				}
				if n := h.chatRequests(); n != 1 {
					t.Errorf("stream=%v: %d upstream calls, want 1", stream, n)
				}
				sent := h.lastRequest(t).Body
				first := gjson.GetBytes(sent, "messages.0")
				injected := first.Get("role").Str == "system" && strings.Contains(first.Get("content").Str, "# 红色警戒 3")
				if injected != tc.knowledge {
					t.Errorf("stream=%v: knowledge injected = %v, want %v: %.300s", stream, injected, tc.knowledge, sent)
				}
				if strings.Contains(string(sent), "机器可读声明") {
					t.Errorf("stream=%v: the claims contract was sent: %.300s", stream, sent)
				}
				if !tc.knowledge && !stream {
					want := strings.Replace(tc.body, `"ra3-analyst"`, `"deepseek-chat"`, 1)
					if string(sent) != want {
						t.Errorf("the request was not forwarded unchanged:\n got %s\nwant %s", sent, want)
					}
				}
				if u := gjson.GetBytes(raw, "usage").Raw; !stream && tc.name == "say hello" && u != `{"completion_tokens":4,"prompt_tokens":24,"prompt_tokens_details":{"cached_tokens":16},"total_tokens":28}` {
					t.Errorf("usage %s, want the upstream's, details and all", u)
				}
			}
		})
	}
}

// TestClientsGetWhatIsNotAnAnalysisAsSent: both clients, streamed and not, get a
// greeting and a JSON-mode answer exactly as the upstream wrote them, with no
// hidden call.
func TestClientsGetWhatIsNotAnAnalysisAsSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, greetingScript, heldRouteConfig("", ""))
	for _, tc := range []struct {
		name string
		c    chatCase
		want string
	}{
		{"say hello", chatCase{Model: "ra3-analyst", Turns: []chatTurn{{Role: "user", Content: "Say hello"}}}, "Hello there!"},
		{"JSON mode", chatCase{Model: "ra3-analyst", ResponseFormat: "json_object", Turns: []chatTurn{{Role: "system", Content: "Answer in JSON."}, {Role: "user", Content: "Greet me"}}}, `{"greeting":"你好"}`},
		{"JSON mode on an analysis", chatCase{Model: "ra3-analyst", ResponseFormat: "json_object", Turns: []chatTurn{{Role: "user", Content: "以 JSON 给出结论。\n" + replayText}}}, `{"greeting":"你好"}`},
	} {
		for client, got := range allClients(t, h, tc.c) {
			if len(got.Choices) != 1 || got.Choices[0].Content != tc.want || got.Choices[0].Finish != "stop" {
				t.Errorf("%s: %s: %+v, want %q", tc.name, client, got.Choices, tc.want)
			}
			if r := got.Header.Get("X-Factgate-Revisions"); r != "" && r != "0" {
				t.Errorf("%s: %s: X-Factgate-Revisions %q", tc.name, client, r)
			}
		}
		if _, err := h.mock.WaitFor(1, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		if n := h.chatRequests(); n != 1 {
			t.Errorf("%s: %d upstream calls, want 1", tc.name, n)
		}
	}
}
