package proxy

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func TestReviseScenariosThroughTheProxy(t *testing.T) {
	t.Parallel()
	leaky := claimsAnswer("抱歉，之前的回答有误。"+storyFixedProse, claimFighter, claimMaybe, claimBase)
	improved := claimsAnswer("## 对局概览\nPlayerA（盟军）在 6:02 出动轰炸机 733；587 可能是基地车。", claimBomber, claimMaybe, claimBase)
	draftUsage := map[string]int{"prompt_tokens": 9000, "completion_tokens": 400}
	fixUsage := map[string]int{"prompt_tokens": 9700, "completion_tokens": 420}
	repairBlock := reviseMarker + "\n```json\n{\"unitClaims\": [" + claimBase + "], \"eventClaims\": [], \"timelineClaims\": []}\n```"
	tests := []struct {
		name      string
		strip     string
		revise    string
		script    string
		calls     int    // chat completions the mock receives per client request
		revisions string // X-Factgate-Revisions
		outcome   string
		usage     int // total tokens the client is billed
		check     func(t *testing.T, content string)
	}{
		{
			name: "a contradiction is revised once and the client sees only the correction", strip: "never",
			script: reviseScript(answerJSON{Content: storyDraftAnswer, Usage: draftUsage}, answerJSON{Content: storyFixedAnswer, Usage: fixUsage}),
			calls:  2, revisions: "1", outcome: "resolved", usage: 9400 + 10120,
			check: func(t *testing.T, content string) {
				if content != storyFixedAnswer {
					t.Errorf("content:\n%s\nwant the corrected answer", content)
				}
			},
		},
		{
			name: "two revisions that do not fix it: the better one, downgraded", strip: "never",
			script: reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: improved}, answerJSON{Content: storyDraftAnswer}),
			calls:  3, revisions: "2", outcome: "improved",
			check: func(t *testing.T, content string) {
				if !strings.HasPrefix(content, "## 对局概览\nPlayerA（盟军）在 6:02 出动轰炸机 733；587 可能是基地车。\n\n⚠") || !strings.Contains(content, "UnitId 733") {
					t.Errorf("content is not the improved revision followed by a notice naming 733:\n%s", content)
				}
				block := claimsBlock(t, content)
				if l := block.Get("unitClaims.0.evidenceLevel").Str; l != "ruled out" {
					t.Errorf("the unresolved 733 claim is %q, want downgraded to ruled out:\n%s", l, content)
				}
				if l := block.Get("unitClaims.2.evidenceLevel").Str; l != "confirmed" {
					t.Errorf("the unflagged 246 claim became %q", l)
				}
			},
		},
		{
			name: "stripping: the downgrade is in the trace, the prose and the notice reach the client", strip: "always",
			script: reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyDraftAnswer}),
			calls:  2, revisions: "1", outcome: "downgraded",
			check: func(t *testing.T, content string) {
				if !strings.HasPrefix(content, storyDraftProse+"\n\n⚠") || strings.Contains(content, reviseMarker) || !strings.Contains(content, "UnitId 733") {
					t.Errorf("content %q, want the draft's prose and a notice naming 733, without the claims block", content)
				}
			},
		},
		{
			name: "a revision that apologises loses to a clean one", strip: "never",
			script: reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: leaky}, answerJSON{Content: storyFixedAnswer}),
			calls:  3, revisions: "2", outcome: "resolved",
			check: func(t *testing.T, content string) {
				if content != storyFixedAnswer {
					t.Errorf("content:\n%s\nwant the clean revision", content)
				}
			},
		},
		{
			name: "a revision call that returns 500: the downgraded draft, 200", strip: "never",
			script: reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Fault: map[string]any{"status": 500, "body": `{"error":{"message":"boom"}}`}}),
			calls:  2, revisions: "1", outcome: "failed",
			check: checkDowngradedDraft,
		},
		{
			name: "a revision call that times out: the downgraded draft, 200", strip: "never", revise: "{budget: 300ms}",
			script: reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyFixedAnswer, Fault: map[string]any{"slow_first_byte": "3s"}}),
			calls:  2, revisions: "1", outcome: "failed",
			check: checkDowngradedDraft,
		},
		{
			name: "a missing claims block is repaired", strip: "never",
			script: reviseScript(answerJSON{Content: storyDraftProse}, answerJSON{Content: repairBlock}),
			calls:  2, revisions: "1", outcome: "resolved",
			check: func(t *testing.T, content string) {
				if !strings.HasPrefix(content, storyDraftProse+"\n\n"+reviseMarker+"\n```json\n") || claimsBlock(t, content).Get("unitClaims.0.unitId").Int() != 246 {
					t.Errorf("content:\n%s\nwant the draft followed by the repaired block", content)
				}
			},
		},
		{
			name: "a clean draft makes no extra call", strip: "never",
			script: reviseScript(answerJSON{Content: claimsAnswer("PlayerA 在 1:24 打包主基地。", claimBase), Usage: draftUsage}, answerJSON{Content: "never asked"}),
			calls:  1, revisions: "0", outcome: "accepted", usage: 9400,
			check: func(t *testing.T, content string) {
				if content != claimsAnswer("PlayerA 在 1:24 打包主基地。", claimBase) {
					t.Errorf("a clean draft changed:\n%s", content)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.script, reviseRouteConfig(tc.strip, tc.revise))

			plain := viaGoOpenAI(t, h, false)
			// The mock records a call when it finishes; a cancelled call finishes a
			// moment after the client already has its answer.
			_, _ = h.mock.WaitFor(tc.calls, 3*time.Second)
			if n := h.chatRequests(); n != tc.calls {
				t.Errorf("the upstream received %d chat completions, want %d", n, tc.calls)
			}
			if got := plain.header.Get("X-Factgate-Revisions"); got != tc.revisions {
				t.Errorf("X-Factgate-Revisions = %q, want %q", got, tc.revisions)
			}
			if tc.usage != 0 && plain.usage != tc.usage {
				t.Errorf("usage total %d, want %d (every upstream call summed)", plain.usage, tc.usage)
			}
			tr := h.trace(t, plain.header.Get("X-Factgate-Trace-Id"))
			if got := tr.Get("final.outcome").Str; got != tc.outcome {
				t.Errorf("trace outcome %q, want %q; trace: %s", got, tc.outcome, tr.Raw)
			}
			if tc.outcome == "downgraded" || tc.outcome == "improved" || tc.outcome == "failed" {
				if len(tr.Get("downgrades").Array()) == 0 {
					t.Errorf("the trace records no downgrade: %s", tr.Raw)
				}
			}
			tc.check(t, plain.content)

			for _, client := range []struct {
				name string
				run  func() clientResult
			}{
				{"go-openai stream", func() clientResult { return viaGoOpenAI(t, h, true) }},
				{"openai-go stream", func() clientResult { return viaOpenAIGo(t, h) }},
			} {
				h.mock.Reset()
				got := client.run()
				if got.content != plain.content {
					t.Errorf("%s: streamed content differs from the non-streamed answer:\n%s\n--- non-streamed ---\n%s", client.name, got.content, plain.content)
				}
				if tc.usage != 0 && got.usage != tc.usage {
					t.Errorf("%s: usage %d, want %d", client.name, got.usage, tc.usage)
				}
			}
		})
	}
}

// checkDowngradedDraft asserts the draft came back with its flagged claims
// downgraded.
func checkDowngradedDraft(t *testing.T, content string) {
	t.Helper()
	if !strings.HasPrefix(content, storyDraftProse+"\n\n⚠") || !strings.Contains(content, "UnitId 733") || !strings.Contains(content, "\n\n"+reviseMarker) {
		t.Errorf("content is not the draft followed by a notice naming 733 and the claims block:\n%s", content)
	}
	block := claimsBlock(t, content)
	if l := block.Get("unitClaims.0.evidenceLevel").Str; l != "ruled out" {
		t.Errorf("733 is %q, want ruled out", l)
	}
	if l := block.Get("unitClaims.1.evidenceLevel").Str; l != "possible" {
		t.Errorf("587 is %q, want possible", l)
	}
}

// claimsBlock parses the fenced JSON after the marker.
func claimsBlock(t *testing.T, content string) gjson.Result {
	t.Helper()
	js, ok := claimsJSONOf(content)
	if !ok {
		t.Fatalf("no fenced claims block in:\n%s", content)
	}
	if !gjson.Valid(js) {
		t.Fatalf("invalid claims JSON:\n%s", js)
	}
	return gjson.Parse(js)
}

// claimsJSONOf returns the fenced JSON after the last marker of content.
func claimsJSONOf(content string) (string, bool) {
	i := strings.LastIndex(content, reviseMarker)
	if i < 0 {
		return "", false
	}
	rest := content[i:]
	start := strings.Index(rest, "```json\n")
	end := strings.LastIndex(rest, "```")
	if start < 0 || end <= start {
		return "", false
	}
	return rest[start+len("```json\n") : end], true
}

func TestReviseRevisionRequestIsBuiltFromTheOriginal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyFixedAnswer}), reviseRouteConfig("never", ""))
	body := storyRequest(true)
	body = strings.Replace(body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true},"temperature":0.25,"x_vendor":{"keep":[1,2]}`, 1)
	status, _, _ := h.post(t, "/v1/chat/completions", body)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	recs := h.mock.Requests()
	if len(recs) != 2 {
		t.Fatalf("%d upstream requests, want 2", len(recs))
	}
	draftReq, revReq := gjson.ParseBytes(recs[0].Body), gjson.ParseBytes(recs[1].Body)
	msgs := revReq.Get("messages").Array()
	orig := draftReq.Get("messages").Array()
	if len(msgs) != len(orig)+2 {
		t.Fatalf("revision request has %d messages, want the %d original ones + 2", len(msgs), len(orig))
	}
	for i := range orig {
		if msgs[i].Raw != orig[i].Raw {
			t.Errorf("messages[%d] differs from the original request", i)
		}
	}
	if msgs[len(orig)].Get("role").Str != "assistant" || msgs[len(orig)].Get("content").Str != storyDraftAnswer {
		t.Errorf("the draft is not the assistant turn: %s", msgs[len(orig)].Raw)
	}
	turn := msgs[len(orig)+1].Get("content").Str
	for _, want := range []string{"1. UnitId 733", "9:10.00", "6:02.00 PlayerA 选择 [UnitId]733", "不要提到这次检查"} {
		if !strings.Contains(turn, want) {
			t.Errorf("the revision turn lacks %q:\n%s", want, turn)
		}
	}
	if revReq.Get("stream").Bool() || revReq.Get("stream_options").Exists() {
		t.Errorf("the revision request streams: %s", revReq.Get("stream").Raw)
	}
	if revReq.Get("temperature").Raw != "0.25" || revReq.Get("x_vendor").Raw != `{"keep":[1,2]}` || revReq.Get("model").Str != "deepseek-chat" {
		t.Errorf("client fields changed: temperature %s x_vendor %s model %s", revReq.Get("temperature").Raw, revReq.Get("x_vendor").Raw, revReq.Get("model").Raw)
	}
	if ratio := float64(len(recs[1].Body)) / float64(len(recs[0].Body)); ratio > 1.3 {
		t.Errorf("the revision request is %.2fx the original, want at most 1.3x", ratio)
	}
}

func TestReviseClientDisconnectCancelsTheRevision(t *testing.T) {
	t.Parallel()
	script := reviseScript(answerJSON{Content: storyDraftAnswer}, answerJSON{Content: storyFixedAnswer, Fault: map[string]any{"slow_first_byte": "5s"}})
	h := newHarness(t, script, reviseRouteConfig("never", "{budget: 30s}"))
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := storyRequest(false)
	req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	// Wait until the revision call is in flight at the mock, then go away.
	if err := h.mock.WaitForStarted(2, 10*time.Second); err != nil {
		t.Fatalf("the revision call never reached the upstream: %v", err)
	}
	conn.Close()
	recs, err := h.mock.WaitFor(2, 4*time.Second)
	if err != nil {
		t.Fatalf("the revision request never finished: %v", err)
	}
	rev := recs[1]
	if !rev.Cancelled {
		t.Errorf("the revision call was not cancelled when the client went away: %+v", rev)
	}
	if d := rev.Finished.Sub(rev.Started); d > 3*time.Second {
		t.Errorf("the revision call ran %s after the client left", d)
	}
}

func TestReviseMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t, reviseScript(answerJSON{Content: storyDraftAnswer, Usage: map[string]int{"prompt_tokens": 10, "completion_tokens": 5}},
		answerJSON{Content: storyFixedAnswer, Usage: map[string]int{"prompt_tokens": 100, "completion_tokens": 20}}), reviseRouteConfig("never", ""))
	if status, _, _ := h.post(t, "/v1/chat/completions", storyRequest(false)); status != 200 {
		t.Fatalf("status %d", status)
	}
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, want := range []string{
		`factgate_revisions_total{outcome="resolved",route="ra3",variant=""} 1`,
		`factgate_revision_tokens_total{route="ra3",variant=""} 120`,
		`factgate_revision_attempts_count{route="ra3",variant=""} 1`,
		`factgate_revision_attempts_sum{route="ra3",variant=""} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
