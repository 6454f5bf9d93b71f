package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestHeldStreamHeadersSayWhatIsKnown(t *testing.T) {
	t.Parallel()
	// The draft arrives at once and is revised slowly: the stream's headers go out
	// while the revision runs, when the draft's upstream headers are known.
	script := `
rules:
  - name: revision
    match: {has_assistant: true}
    answer: {content: ` + yamlString(storyFixedAnswer) + `, latency: 600ms, headers: {x-request-id: req-revision}}
  - name: slow
    match: {last_user: "^slow"}
    answer: {content: "slow answer", latency: 600ms, headers: {x-request-id: req-slow}}
default:
  content: ` + yamlString(storyDraftAnswer) + `
  headers: {x-request-id: req-draft, openai-processing-ms: "12"}
`
	h := newHarness(t, script, heldRouteConfig("", ""))
	for _, tc := range []struct {
		name, user, requestID, late string
	}{
		{"the draft arrived before the headers went out", analysisUser(), "req-draft", ""},
		{"the headers went out before the upstream answered", "slow, please", "", ": x-request-id: req-slow\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"model": "ra3-analyst", "stream": true, "messages": []map[string]string{{"role": "user", "content": tc.user}}})
			status, hdr, raw := h.post(t, "/v1/chat/completions", string(body))
			if status != 200 || !strings.Contains(string(raw), ": keep-alive") {
				t.Fatalf("%d, want a held stream with keep-alives:\n%s", status, raw)
			}
			if hdr.Get("X-Factgate-Overhead") == "" || hdr.Get("X-Factgate-Trace-Id") == "" {
				t.Errorf("headers %v lack X-Factgate-Overhead or X-Factgate-Trace-Id", hdr)
			}
			if got := hdr.Get("X-Request-Id"); got != tc.requestID {
				t.Errorf("x-request-id header %q, want %q", got, tc.requestID)
			}
			text := string(raw)
			done := strings.Index(text, "data: [DONE]")
			overhead := strings.Index(text, ": X-Factgate-Overhead: ")
			if overhead < 0 || overhead > done {
				t.Errorf("the total overhead is not told before [DONE]:\n%s", text[max(0, done-400):])
			}
			if tc.late != "" && !strings.Contains(strings.ToLower(text), tc.late) {
				t.Errorf("the upstream's x-request-id is not told at the end (%q):\n%s", tc.late, text[max(0, done-400):])
			}
		})
	}
}
