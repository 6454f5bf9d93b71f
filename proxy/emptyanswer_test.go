package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// A 2xx chat answer with no choice carrying a message is the upstream's failure:
// there is nothing to check, revise or return.
func TestAHeldAnswerWithoutAChoiceIsABadResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body string }{
		{"empty object", `{}`},
		{"no choices", `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3}}`},
		{"a choice without a message", `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop"}]}`},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				script := reviseScript(answerJSON{Fault: map[string]any{"status": 200, "body": tc.body}})
				// A held stream never commits its headers before the chain ends
				// (withHeldCommit(nil)): a loaded machine cannot make the error an
				// event of a committed stream.
				h := newHarness(t, script, reviseRouteConfig("never", ""), withHeldCommit(nil))
				status, hdr, body := h.post(t, "/v1/chat/completions", storyRequest(stream))
				if stream {
					// The chain ended before the stream was committed: the answer
					// comes as an error, not as an event stream.
					if status != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_bad_response" {
						t.Fatalf("%d %s", status, body)
					}
				} else if status != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_bad_response" {
					t.Fatalf("%d %s", status, body)
				}
				if got := hdr.Get("X-Factgate-Revisions"); got != "" && got != "0" {
					t.Errorf("X-Factgate-Revisions = %q", got)
				}
				_, _ = h.mock.WaitFor(1, 3*time.Second)
				if n := h.chatRequests(); n != 1 {
					t.Errorf("the upstream received %d chat completions, want 1 (no hidden call)", n)
				}
				if !strings.Contains(h.logs.String(), `"error":"upstream_bad_response"`) {
					t.Errorf("the access log does not name upstream_bad_response:\n%s", h.logs.String())
				}
			})
		}
	}
}

// A revision that answers 200 with nothing in it is a failed attempt: the client
// gets the downgraded draft, never an empty answer.
func TestARevisionWithoutAChoiceIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{}`, `{"choices":[]}`} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			script := reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Fault: map[string]any{"status": 200, "body": body}})
			h := newHarness(t, script, reviseRouteConfig("never", ""))
			res := viaGoOpenAI(t, h, false)
			checkDowngradedDraft(t, res.content)
			tr := h.trace(t, res.header.Get("X-Factgate-Trace-Id"))
			if got := tr.Get("final.outcome").Str; got != "failed" {
				t.Errorf("outcome %q, want failed: %s", got, tr.Raw)
			}
			if e := tr.Get("attempts.1.error").Str; !strings.Contains(e, "no choice with a message") {
				t.Errorf("the revision attempt's error is %q: %s", e, tr.Raw)
			}
		})
	}
}
