package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors/abtest"
)

// The A/B experiment's end-to-end tests: the real chain (experiment, context,
// facts, inject, validate, revise) on the RA3 pack against the mock upstream. The
// mock answers a contradicted draft unless the system prompt carries the strict
// variant's rule, so the variants differ in what the report measures.

const abStrictRule = "严格模式：只引用录像中真实出现过的操作。"

// abConfig is a validating RA3 route with a three-variant experiment;
// %FORCING% and %PROMPT% are replaced per test.
const abConfig = `
server: {keepalive_interval: 150ms}
log: {level: warn}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 5s}
%CACHE%
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    upstream_model: deepseek-chat
    pack: ra3
    inject: {}
    validate: {strip_claims: never}
    experiment:
      name: strict-rules
      allow_forcing: %FORCING%
      control: baseline
      variants:
        - {name: baseline, weight: 50}
        - name: strict
          weight: 50
          additional_rules: "` + abStrictRule + `"
          model: deepseek-reasoner
          temperature: 0.2
          sampling: {presence_penalty: 0.5, response_format: {type: text}}
        - name: custom
          weight: 0.001
          use_custom_system_prompt: true
          custom_system_prompt_file: %PROMPT%
          validate: false
`

// abScript answers revisions and strict drafts cleanly, every other draft with
// contradictions.
func abScript() string {
	b, err := json.Marshal(map[string]any{
		"default": answerJSON{Content: storyDraftAnswer, Usage: map[string]int{"prompt_tokens": 900, "completion_tokens": 100}},
		"rules": []any{
			map[string]any{"name": "revision", "match": map[string]any{"has_assistant": true}, "answer": answerJSON{Content: storyFixedAnswer, Usage: map[string]int{"prompt_tokens": 1000, "completion_tokens": 120}}},
			map[string]any{"name": "strict", "match": map[string]any{"system": "严格模式"}, "answer": answerJSON{Content: storyFixedAnswer, Usage: map[string]int{"prompt_tokens": 950, "completion_tokens": 110}}},
		},
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

const abCustomPrompt = "你是一名只看事实的录像裁判。"

// newABHarness starts the mock and a proxy with the experiment; cacheBlock is the
// config's cache block ("" for memory).
func newABHarness(t *testing.T, forcing bool, cacheBlock string) *harness {
	t.Helper()
	prompt := filepath.Join(t.TempDir(), "custom.md")
	if err := os.WriteFile(prompt, []byte(abCustomPrompt), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("%FORCING%", fmt.Sprint(forcing), "%PROMPT%", prompt, "%CACHE%", cacheBlock).Replace(abConfig)
	return newHarness(t, abScript(), cfg)
}

// abBody is the story request with fields factgate does not know, in odd spacing.
func abBody(extra string) string {
	user, _ := json.Marshal("分析这局录像。\n\n" + replayText)
	return `{"model": "ra3-analyst",  "x_vendor": {"k": [1, 2.50, null], "s": "原样"}, "messages": [{"role":"user","content":` + string(user) + `}], "temperature": 0.9, "seed": 7` + extra + `}`
}

func TestExperimentVariantsReachTheUpstream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		variant string
		check   func(t *testing.T, up []byte, prompt string)
	}{
		{name: "the control changes nothing the route does not", variant: "baseline", check: func(t *testing.T, up []byte, prompt string) {
			if m := gjson.GetBytes(up, "model").Str; m != "deepseek-chat" {
				t.Errorf("model %q, want the route's deepseek-chat", m)
			}
			if tmp := gjson.GetBytes(up, "temperature").Raw; tmp != "0.9" {
				t.Errorf("temperature %s, want the client's 0.9", tmp)
			}
			if strings.Contains(prompt, "严格模式") || !strings.Contains(prompt, reviseMarker) || !strings.Contains(prompt, "## 阵营：盟军") {
				t.Errorf("the control's prompt is not the route's (knowledge and contract, no strict rule):\n%.300s", prompt)
			}
		}},
		{name: "strict: its rules, model and sampling fields", variant: "strict", check: func(t *testing.T, up []byte, prompt string) {
			for field, want := range map[string]string{"model": `"deepseek-reasoner"`, "temperature": "0.2", "presence_penalty": "0.5", "response_format": `{"type":"text"}`} {
				if got := gjson.GetBytes(up, field).Raw; got != want {
					t.Errorf("%s = %s, want %s", field, got, want)
				}
			}
			if !strings.HasSuffix(strings.TrimSpace(prompt), abStrictRule) || !strings.Contains(prompt, "## 阵营：盟军") {
				t.Errorf("the system prompt does not end with the variant's rule after the knowledge:\n...%s", abTail(prompt, 300))
			}
		}},
		{name: "custom: its prompt replaces the knowledge, and validation is off", variant: "custom", check: func(t *testing.T, up []byte, prompt string) {
			if !strings.HasPrefix(prompt, abCustomPrompt) || strings.Contains(prompt, "## 阵营：盟军") {
				t.Errorf("the custom prompt did not replace the knowledge:\n%.300s", prompt)
			}
			if strings.Contains(prompt, reviseMarker) {
				t.Error("the claims contract was injected for a variant with validation off")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newABHarness(t, true, "")
			body := abBody("")
			status, hdr, resp := h.post(t, "/v1/chat/completions", body, "X-Factgate-Variant", tc.variant)
			if status != 200 {
				t.Fatalf("%d %s", status, resp)
			}
			if got := hdr.Get("X-Factgate-Variant"); got != tc.variant {
				t.Errorf("X-Factgate-Variant: %q, want %q", got, tc.variant)
			}
			up := h.mock.Requests()[0] // the draft
			if up.Header.Get("X-Factgate-Variant") != "" {
				t.Error("the forcing header reached the upstream")
			}
			// The fields factgate does not know arrive byte for byte.
			for _, field := range []string{"x_vendor", "seed"} {
				if got, want := gjson.GetBytes(up.Body, field).Raw, gjson.Get(body, field).Raw; got != want {
					t.Errorf("%s arrived as %s, sent %s", field, got, want)
				}
			}
			if !strings.Contains(string(up.Body), `"x_vendor": {"k": [1, 2.50, null], "s": "原样"}, "messages"`) {
				t.Errorf("the unknown fields were re-encoded:\n%.200s", up.Body)
			}
			tc.check(t, up.Body, gjson.GetBytes(up.Body, "messages.0.content").Str)
			tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
			if tr.Get("variant").Str != tc.variant || !strings.Contains(tr.Get("notes").Raw, "forced by X-Factgate-Variant") {
				t.Errorf("trace variant %q notes %s", tr.Get("variant").Str, tr.Get("notes").Raw)
			}
		})
	}
}

func TestExperimentForcing(t *testing.T) {
	t.Parallel()
	t.Run("allowed: an unknown variant is a 400 naming the variants, and nothing goes upstream", func(t *testing.T) {
		t.Parallel()
		h := newABHarness(t, true, "")
		status, _, resp := h.post(t, "/v1/chat/completions", abBody(""), "X-Factgate-Variant", "stricter")
		e := gjson.GetBytes(resp, "error")
		if status != 400 || e.Get("code").Str != "unknown_variant" || e.Get("param").Str != "X-Factgate-Variant" ||
			!strings.Contains(e.Get("message").Str, "variants: baseline, strict, custom") {
			t.Fatalf("%d %s", status, resp)
		}
		if n := len(h.mock.Requests()); n != 0 {
			t.Fatalf("the upstream was called %d times", n)
		}
	})
	t.Run("not allowed: the header is ignored, the subject decides, the trace says why", func(t *testing.T) {
		t.Parallel()
		h := newABHarness(t, false, "")
		for i := 0; i < 8; i++ {
			body := abBody(fmt.Sprintf(`, "user": "player-%d"`, i))
			status, hdr, resp := h.post(t, "/v1/chat/completions", body, "X-Factgate-Variant", "custom")
			if status != 200 {
				t.Fatalf("%d %s", status, resp)
			}
			_, natural, _ := h.post(t, "/v1/chat/completions", body)
			if got, want := hdr.Get("X-Factgate-Variant"), natural.Get("X-Factgate-Variant"); got != want || got == "" {
				t.Fatalf("player-%d got %q with the forcing header, %q without: the forbidden header chose the variant", i, got, want)
			}
			if i == 0 {
				notes := h.trace(t, hdr.Get("X-Factgate-Trace-Id")).Get("notes").Raw
				if !strings.Contains(notes, `X-Factgate-Variant \"custom\" ignored`) || !strings.Contains(notes, "by the subject from the body's user") {
					t.Errorf("trace notes %s", notes)
				}
			}
		}
	})
}

// abReport fetches the experiment report and waits until it counts want requests
// (the counters are written in the background).
// abReport polls the report until its variants count want requests, forced ones
// included (counters are written in the background).
func abReport(t *testing.T, base string, want int64) abtest.ExperimentReport {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(base + abtest.ReportPath)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var rep abtest.Report
		if resp.StatusCode != 200 || json.Unmarshal(b, &rep) != nil || len(rep.Experiments) != 1 {
			t.Fatalf("%s: %d %s", abtest.ReportPath, resp.StatusCode, b)
		}
		er := rep.Experiments[0]
		got := int64(0)
		for _, v := range er.Variants {
			got += v.Requests + v.ForcedRequests
		}
		if got == want {
			return er
		}
		if time.Now().After(deadline) {
			t.Fatalf("the report counts %d requests, want %d:\n%s", got, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// abSend sends n requests through an unchanged OpenAI client, each by its own
// user, and returns how many each variant got.
func abSend(t *testing.T, base string, users []string) map[string]int {
	t.Helper()
	var hdr http.Header
	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = base + "/v1"
	cfg.HTTPClient = &http.Client{Transport: headerTap{next: http.DefaultTransport, last: &hdr}}
	c := goopenai.NewClientWithConfig(cfg)
	got := map[string]int{}
	for _, u := range users {
		resp, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
			Model: "ra3-analyst",
			User:  u,
			Messages: []goopenai.ChatCompletionMessage{
				{Role: "user", Content: "分析这局录像。\n\n" + replayText},
			},
		})
		if err != nil {
			t.Fatalf("user %s: %v", u, err)
		}
		if len(resp.Choices) == 0 || !strings.Contains(resp.Choices[0].Message.Content, "5:30") {
			t.Fatalf("user %s did not get the corrected answer: %+v", u, resp.Choices)
		}
		got[hdr.Get("X-Factgate-Variant")]++
	}
	return got
}

func abVariant(er abtest.ExperimentReport, name string) abtest.VariantReport {
	for _, v := range er.Variants {
		if v.Name == name {
			return v
		}
	}
	return abtest.VariantReport{}
}

func TestExperimentReportShowsWhichVariantContradictsLess(t *testing.T) {
	t.Parallel()
	h := newABHarness(t, true, "")
	users := make([]string, 40)
	for i := range users {
		users[i] = fmt.Sprintf("analyst-%02d", i)
	}
	sent := abSend(t, h.base, users)
	// One forced request, counted apart.
	if status, _, resp := h.post(t, "/v1/chat/completions", abBody(""), "X-Factgate-Variant", "baseline"); status != 200 {
		t.Fatalf("%d %s", status, resp)
	}
	if sent["baseline"] == 0 || sent["strict"] == 0 {
		t.Fatalf("40 users all went to one variant: %v", sent)
	}
	er := abReport(t, h.base, 41)
	base, strict := abVariant(er, "baseline"), abVariant(er, "strict")
	if base.Requests != int64(sent["baseline"]) || strict.Requests != int64(sent["strict"]) || base.ForcedRequests != 1 {
		t.Fatalf("report counts baseline %d (+%d forced), strict %d; the clients saw %v and one forced", base.Requests, base.ForcedRequests, strict.Requests, sent)
	}
	// Every baseline draft contradicts the replay and is revised; no strict one is.
	if r := base.Rates.FirstDraftContradiction; r.Count != base.Requests || r.Total != base.Requests || *r.Value != 1 {
		t.Errorf("baseline first-draft contradiction %s, want all of %d", r, base.Requests)
	}
	if r := strict.Rates.FirstDraftContradiction; r.Count != 0 || *r.Value != 0 || *r.High <= 0 {
		t.Errorf("strict first-draft contradiction %s, want 0 with a positive upper bound", r)
	}
	if base.Outcomes[abtest.OutcomeResolved] != base.Requests || base.Revisions != base.Requests || strict.Revisions != 0 {
		t.Errorf("baseline outcomes %v revisions %d, strict revisions %d", base.Outcomes, base.Revisions, strict.Revisions)
	}
	// Tokens, from the scripted usage: a baseline request is a draft (1000) and a
	// revision (1120), a strict one a draft (1060).
	if base.Tokens.Total != 2120*base.Requests || base.Tokens.Draft != 1000*base.Requests || strict.Tokens.Total != 1060*strict.Requests {
		t.Errorf("tokens baseline %+v strict %+v", base.Tokens, strict.Tokens)
	}
	c := er.Comparisons[0]
	if c.Variant != "strict" || c.Metric != abtest.MetricFirstDraftContradiction || c.Difference == nil || *c.Difference != -1 || c.P == nil || *c.P >= 0.001 {
		t.Errorf("strict vs baseline: %s vs %s, difference %v p %v, want a difference of −1 with p < 0.001", c.Treatment, c.Control, abDeref(c.Difference), abDeref(c.P))
	}

	// Prometheus carries route and variant.
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`factgate_experiment_requests_total{experiment="strict-rules",outcome="resolved",route="ra3",variant="baseline"} %d`, sent["baseline"]+1),
		fmt.Sprintf(`factgate_experiment_requests_total{experiment="strict-rules",outcome="accepted",route="ra3",variant="strict"} %d`, sent["strict"]),
		`factgate_experiment_assignments_total{experiment="strict-rules",method="forced",route="ra3",variant="baseline"} 1`,
		`factgate_experiment_first_drafts_total{experiment="strict-rules",route="ra3",variant="baseline",worst="Contradiction"}`,
		// The validation and revision metrics carry the variant too.
		fmt.Sprintf(`factgate_revisions_total{outcome="resolved",route="ra3",variant="baseline"} %d`, sent["baseline"]+1),
		fmt.Sprintf(`factgate_revision_attempts_count{route="ra3",variant="strict"} %d`, sent["strict"]),
		`factgate_validation_issues_total{code="timeline.before_production",route="ra3",severity="Contradiction",variant="baseline"}`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func abDeref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// abTail returns the last n bytes of s.
func abTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
