package mockupstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// streamChunk is the part of a chat.completion.chunk the stream tests look at.
type streamChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role             *string `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageJSON `json:"usage"`
}

// usageJSON is the usage object of a completion.
type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func TestStreamEventsSplitTextByRunes(t *testing.T) {
	t.Parallel()
	const content = "587 可能是盟军基地车，也可能是矿车指挥部。🙂 done"
	const reasoning = "先看打包，再看展开。"
	cases := []struct {
		name         string
		chunkSize    int
		includeUsage bool
	}{
		{name: "one rune per event", chunkSize: 1},
		{name: "three runes per event with usage", chunkSize: 3, includeUsage: true},
		{name: "whole text in one event", chunkSize: 1000, includeUsage: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			script := &Script{Default: &Answer{Content: content, Reasoning: reasoning, ChunkSize: c.chunkSize}}
			s := startMock(t, script, Options{})
			body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			if c.includeUsage {
				body = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
			}
			resp, raw := post(t, s, "/v1/chat/completions", body, nil)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("Content-Type = %q, want text/event-stream", ct)
			}
			events := sseData(t, raw)
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("the stream does not end with [DONE]: %q", events[len(events)-1])
			}
			var chunks []streamChunk
			for _, e := range events[:len(events)-1] {
				var ch streamChunk
				if err := json.Unmarshal([]byte(e), &ch); err != nil {
					t.Fatalf("event is not JSON: %q: %v", e, err)
				}
				if ch.Object != "chat.completion.chunk" || ch.ID != "chatcmpl-mock-1" || ch.Model != "m" {
					t.Errorf("chunk header object %q id %q model %q", ch.Object, ch.ID, ch.Model)
				}
				chunks = append(chunks, ch)
			}
			if r := chunks[0].Choices[0].Delta.Role; r == nil || *r != "assistant" {
				t.Errorf("the first chunk does not carry role assistant: %s", events[0])
			}
			if c.includeUsage {
				last := chunks[len(chunks)-1]
				if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != CompletionTokens(content, reasoning) {
					t.Errorf("the last chunk is not the usage chunk with empty choices: %s", events[len(events)-2])
				}
				chunks = chunks[:len(chunks)-1]
			}
			fin := chunks[len(chunks)-1].Choices[0].FinishReason
			if fin == nil || *fin != "stop" {
				t.Errorf("the last choice chunk has finish_reason %v, want stop", fin)
			}
			var gotReasoning, gotContent strings.Builder
			contentSeen := false
			for i, ch := range chunks[1 : len(chunks)-1] {
				d := ch.Choices[0].Delta
				var piece string
				switch {
				case d.ReasoningContent != nil:
					if contentSeen {
						t.Errorf("event %d: reasoning after content", i+1)
					}
					piece = *d.ReasoningContent
					gotReasoning.WriteString(piece)
				case d.Content != nil:
					contentSeen = true
					piece = *d.Content
					gotContent.WriteString(piece)
				default:
					t.Fatalf("event %d has neither content nor reasoning: %s", i+1, events[i+1])
				}
				if !utf8.ValidString(piece) || utf8.RuneCountInString(piece) > c.chunkSize || piece == "" {
					t.Errorf("event %d piece %q: not 1..%d whole runes", i+1, piece, c.chunkSize)
				}
			}
			if gotReasoning.String() != reasoning || gotContent.String() != content {
				t.Errorf("reassembled reasoning %q content %q", gotReasoning.String(), gotContent.String())
			}
			wantEvents := 2 + ceilDiv(utf8.RuneCountInString(content), c.chunkSize) + ceilDiv(utf8.RuneCountInString(reasoning), c.chunkSize)
			if len(chunks) != wantEvents {
				t.Errorf("%d choice events, want %d (role, pieces, finish)", len(chunks), wantEvents)
			}
		})
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func TestNonStreamCompletionShape(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, `
default:
  content: "第一行\n\"quoted\" \\ tab\t<b>"
  reasoning: "why"
  finish_reason: length
`), Options{Now: func() time.Time { return time.Unix(1700000000, 0) }})
	for i := 1; i <= 2; i++ {
		resp, raw := post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"model":"deep\"seek"}`, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var got struct {
			ID                string `json:"id"`
			Object            string `json:"object"`
			Created           int64  `json:"created"`
			Model             string `json:"model"`
			SystemFingerprint string `json:"system_fingerprint"`
			Choices           []struct {
				Index   int `json:"index"`
				Message struct {
					Role             string `json:"role"`
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usageJSON `json:"usage"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("invalid JSON %s: %v", raw, err)
		}
		m := got.Choices[0].Message
		if got.ID != fmt.Sprintf("chatcmpl-mock-%d", i) || got.Object != "chat.completion" || got.Created != 1700000000 ||
			got.Model != `deep"seek` || got.SystemFingerprint == "" {
			t.Errorf("header fields: %s", raw)
		}
		if m.Role != "assistant" || m.Content != "第一行\n\"quoted\" \\ tab\t<b>" || m.ReasoningContent != "why" || got.Choices[0].FinishReason != "length" {
			t.Errorf("choice: %s", raw)
		}
		if u := got.Usage; u.PromptTokens != 4+1 || u.CompletionTokens != CompletionTokens(m.Content, "why") || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Errorf("usage %+v", u)
		}
	}
}

func TestUsageIsComputedFromMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		body   string
		prompt int
	}{
		{name: "one string message", body: `{"model":"m","messages":[{"role":"user","content":"12345"}]}`, prompt: 4 + 2},
		{name: "system and user", body: `{"model":"m","messages":[{"role":"system","content":"abcd"},{"role":"user","content":"你好"}]}`, prompt: 4 + 1 + 4 + 2},
		{name: "content parts joined by newline", body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"abc"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"d"}]}]}`, prompt: 4 + 2},
		{name: "null content of a tool call", body: `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[]},{"role":"user","content":""}]}`, prompt: 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startMock(t, &Script{Default: &Answer{Content: "123456789"}}, Options{})
			_, raw := post(t, s, "/v1/chat/completions", c.body, nil)
			var got struct {
				Usage usageJSON `json:"usage"`
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			u := got.Usage
			if u.PromptTokens != c.prompt || u.CompletionTokens != 3 || u.TotalTokens != c.prompt+3 {
				t.Errorf("usage %+v, want prompt %d completion 3", u, c.prompt)
			}
			if p, err := PromptTokens([]byte(c.body)); err != nil || p != c.prompt {
				t.Errorf("PromptTokens = %d, %v; want %d", p, err, c.prompt)
			}
		})
	}
}

func TestMatchPredicates(t *testing.T) {
	t.Parallel()
	type request struct {
		body   string
		header http.Header
	}
	user := func(text string) request { return request{body: chatBody("m", text, false)} }
	msgs := func(model string, messages ...string) request {
		var parts []string
		for i := 0; i+1 < len(messages); i += 2 {
			parts = append(parts, fmt.Sprintf(`{"role":%q,"content":%q}`, messages[i], messages[i+1]))
		}
		return request{body: fmt.Sprintf(`{"model":%q,"messages":[%s]}`, model, strings.Join(parts, ","))}
	}
	cases := []struct {
		name  string
		match string
		hit   []request
		miss  []request
	}{
		{
			name:  "last_user",
			match: `last_user: "(?i)^analyse"`,
			hit:   []request{user("Analyse this"), msgs("m", "user", "hello", "assistant", "x", "user", "analyse now")},
			miss:  []request{user("please analyse"), msgs("m", "user", "analyse", "assistant", "x", "user", "again"), msgs("m", "system", "analyse")},
		},
		{
			name:  "last_user in content parts",
			match: `last_user: "^first\nsecond$"`,
			hit:   []request{{body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"first"},{"type":"text","text":"second"}]}]}`}},
			miss:  []request{{body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"first second"}]}]}`}},
		},
		{
			name:  "system",
			match: `system: "\\[机器可读声明\\]"`,
			hit:   []request{msgs("m", "system", "rules", "developer", "输出 [机器可读声明]", "user", "x")},
			miss:  []request{msgs("m", "system", "rules", "user", "[机器可读声明]"), user("x")},
		},
		{
			name:  "any_message",
			match: `any_message: "(?m)^地图: "`,
			hit:   []request{msgs("m", "system", "s", "user", "Mod: default\n地图: map_mp_2\n玩家: A", "assistant", "a", "user", "more")},
			miss:  []request{msgs("m", "user", "no map here 地图: inline")},
		},
		{
			name:  "model",
			match: `model: deepseek-reasoner`,
			hit:   []request{msgs("deepseek-reasoner", "user", "x")},
			miss:  []request{msgs("deepseek-reasoner-2", "user", "x"), msgs("deepseek-chat", "user", "x")},
		},
		{
			name:  "has_assistant true",
			match: `has_assistant: true`,
			hit:   []request{msgs("m", "user", "q", "assistant", "draft", "user", "fix it")},
			miss:  []request{msgs("m", "system", "s", "user", "q")},
		},
		{
			name:  "has_assistant false",
			match: `has_assistant: false`,
			hit:   []request{msgs("m", "system", "s", "user", "q")},
			miss:  []request{msgs("m", "user", "q", "assistant", "draft", "user", "fix it")},
		},
		{
			name:  "assistant",
			match: `assistant: "confirmed"`,
			hit:   []request{msgs("m", "user", "q", "assistant", "old confirmed", "user", "x", "assistant", "evidenceLevel confirmed", "user", "fix")},
			miss:  []request{msgs("m", "user", "q", "assistant", "confirmed", "user", "x", "assistant", "possible", "user", "fix"), user("confirmed")},
		},
		{
			name:  "response_format",
			match: `response_format: json_schema`,
			hit:   []request{{body: `{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"v","strict":true,"schema":{}}},"messages":[{"role":"user","content":"x"}]}`}},
			miss:  []request{{body: `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x"}]}`}, user("x")},
		},
		{
			name:  "header",
			match: `header: {x-factgate-variant: "^b$", authorization: "^Bearer sk-"}`,
			hit:   []request{{body: chatBody("m", "x", false), header: http.Header{"X-Factgate-Variant": {"a", "b"}, "Authorization": {"Bearer sk-1"}}}},
			miss: []request{
				{body: chatBody("m", "x", false), header: http.Header{"X-Factgate-Variant": {"a"}, "Authorization": {"Bearer sk-1"}}},
				{body: chatBody("m", "x", false), header: http.Header{"Authorization": {"Bearer sk-1"}}},
			},
		},
		{
			name:  "all predicates must hold",
			match: `{model: m, has_assistant: true, last_user: "^fix"}`,
			hit:   []request{msgs("m", "user", "q", "assistant", "d", "user", "fix")},
			miss:  []request{msgs("m", "user", "q", "assistant", "d", "user", "again"), msgs("n", "user", "q", "assistant", "d", "user", "fix")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			script := mustParse(t, fmt.Sprintf("rules:\n  - name: target\n    match: %s\n    answer: {content: hit}\ndefault: {content: miss}\n", indentFlow(c.match)))
			s := startMock(t, script, Options{})
			check := func(r request, want string) {
				t.Helper()
				resp, raw := post(t, s, "/v1/chat/completions", r.body, r.header)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, raw)
				}
				if got := completionContent(t, raw); got != want {
					t.Errorf("request %s (headers %v) got %q, want %q", r.body, r.header, got, want)
				}
			}
			for _, r := range c.hit {
				check(r, "hit")
			}
			for _, r := range c.miss {
				check(r, "miss")
			}
			recs, _ := s.WaitFor(len(c.hit)+len(c.miss), 5*time.Second)
			for i, rec := range recs {
				want := "target"
				if i >= len(c.hit) {
					want = "default"
				}
				if rec.Rule != want {
					t.Errorf("request %d recorded rule %q, want %q", i, rec.Rule, want)
				}
			}
		})
	}
}

// indentFlow turns a one-line "key: value" into a flow mapping for embedding after
// "match: ".
func indentFlow(m string) string {
	if strings.HasPrefix(m, "{") {
		return m
	}
	return "{" + m + "}"
}

// TestCyclingSequencesAndSeededRandomFaults: cycle repeats a sequence from the
// start; random_fault fails the same matches in every run (the draw is by match
// index), at about its rate, and Reset restarts the draws.
func TestCyclingSequencesAndSeededRandomFaults(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, `
rules:
  - name: cycle
    match: {last_user: "^cycle"}
    cycle: true
    answers: [{content: a}, {content: b}, {fault: {status: 503, body: "every third"}}]
  - name: flaky
    match: {last_user: "^flaky"}
    random_fault:
      rate: 0.3
      seed: 7
      answer: {fault: {status: 429, body: "slow down", headers: {retry-after-ms: "5"}}}
    answer: {content: fine}
`), Options{})
	ask := func(text string) string {
		resp, raw := post(t, s, "/v1/chat/completions", chatBody("m", text, false), nil)
		if resp.StatusCode != http.StatusOK {
			return strings.TrimSpace(fmt.Sprintf("%d %s %s", resp.StatusCode, raw, resp.Header.Get("retry-after-ms")))
		}
		return completionContent(t, raw)
	}
	var got []string
	for range 7 {
		got = append(got, ask("cycle"))
	}
	if want := "a|b|503 every third|a|b|503 every third|a"; strings.Join(got, "|") != want {
		t.Errorf("cycling answers %q, want %q", strings.Join(got, "|"), want)
	}
	run := func() string {
		var b strings.Builder
		for range 200 {
			if ask("flaky") == "fine" {
				b.WriteByte('.')
			} else {
				b.WriteByte('x')
			}
		}
		return b.String()
	}
	first := run()
	if n := strings.Count(first, "x"); n < 40 || n > 80 {
		t.Errorf("random_fault rate 0.3 failed %d of 200 matches", n)
	}
	if got := ask("flaky"); got != "fine" && got != "429 slow down 5" {
		t.Errorf("a failing match answers %q, want the scripted 429 with its header", got)
	}
	s.Reset()
	if second := run(); second != first {
		t.Errorf("the same seed failed other matches after Reset:\n%s\n%s", first, second)
	}
	if err := New(Options{Script: mustParse(t, "rules: [{answer: {}, random_fault: {rate: 1.5, answer: {}}}]")}).Start("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "random_fault.rate 1.5") {
		t.Errorf("rate 1.5: %v, want an error naming random_fault.rate", err)
	}
}

func TestAnswerSequencesAndReset(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, `
rules:
  - name: seq
    match: {last_user: "^seq"}
    answers:
      - {content: first}
      - {fault: {status: 503, body: "overloaded"}}
      - {content: third}
  - name: other
    match: {last_user: "^other"}
    answers: [{content: o1}, {content: o2}]
`), Options{})
	ask := func(text string) string {
		resp, raw := post(t, s, "/v1/chat/completions", chatBody("m", text, false), nil)
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("%d %s", resp.StatusCode, raw)
		}
		return completionContent(t, raw)
	}
	var got []string
	for _, q := range []string{"seq", "other", "seq", "seq", "seq", "other", "other"} {
		got = append(got, ask(q))
	}
	want := "first|o1|503 overloaded|third|third|o2|o2"
	if strings.Join(got, "|") != want {
		t.Errorf("answers %q, want %q", strings.Join(got, "|"), want)
	}
	s.Reset()
	if got := ask("seq"); got != "first" {
		t.Errorf("after Reset the sequence gives %q, want first", got)
	}
	if recs := s.Requests(); len(recs) != 1 {
		t.Errorf("after Reset and one request, %d recorded", len(recs))
	}
}

func TestTemplatesAndScriptFile(t *testing.T) {
	t.Parallel()
	script, err := LoadScript("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startMock(t, script, Options{})
	cases := []struct {
		name, body, content string
	}{
		{name: "last_user echoed", body: chatBody("m", "echo 你好 \"x\"", false), content: "you said: echo 你好 \"x\""},
		{name: "content_file relative to the script", body: chatBody("m", "file", false), content: "# 分析\n\nAlice 的 587 是盟军基地车。\n"},
		{name: "default", body: chatBody("m", "nothing", false), content: "default answer"},
		{name: "rule needs its model", body: chatBody("deepseek-chat", "reason", false), content: "default answer"},
		{name: "reasoning rule", body: chatBody("deepseek-reasoner", "reason", false), content: "结论：587 可能是基地车。"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, raw := post(t, s, "/v1/chat/completions", c.body, nil)
			if got := completionContent(t, raw); got != c.content {
				t.Errorf("content %q, want %q", got, c.content)
			}
		})
	}
}

func TestAnswerHeadersUsageAndExtraFields(t *testing.T) {
	t.Parallel()
	script, err := LoadScript("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	script.Rules = append(script.Rules, Rule{
		Name:   "override",
		Match:  Match{LastUser: "^override$"},
		Answer: &Answer{Content: "x", Extra: map[string]any{"model": "upstream-real-name", "x.dotted": 1}},
	})
	s := startMock(t, script, Options{})

	resp, raw := post(t, s, "/v1/chat/completions", chatBody("deepseek-reasoner", "reason", false), nil)
	if resp.Header.Get("X-Request-Id") != "req-mock-1" {
		t.Errorf("X-Request-Id = %q", resp.Header.Get("X-Request-Id"))
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if xp, _ := got["x_provider"].(map[string]any); xp["region"] != "eu" || xp["cached"] != false {
		t.Errorf("x_provider not merged into the response: %s", raw)
	}

	_, raw = post(t, s, "/v1/chat/completions", `{"model":"deepseek-reasoner","stream":true,"messages":[{"role":"user","content":"reason"}]}`, nil)
	events := sseData(t, raw)
	for _, e := range events[:len(events)-1] {
		if !strings.Contains(e, `"x_provider":{"cached":false,"region":"eu"}`) {
			t.Errorf("stream chunk without the extra field: %s", e)
		}
	}

	_, raw = post(t, s, "/v1/chat/completions", chatBody("file-model", "file", false), nil)
	var u struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usageJSON `json:"usage"`
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatal(err)
	}
	if u.Usage.PromptTokens != 100 || u.Usage.CompletionTokens != 7 || u.Usage.TotalTokens != 107 || u.Choices[0].FinishReason != "length" {
		t.Errorf("usage override or finish_reason not applied: %s", raw)
	}

	_, raw = post(t, s, "/v1/chat/completions", chatBody("asked", "override", false), nil)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("overriding a key left invalid JSON: %s", raw)
	}
	if got["model"] != "upstream-real-name" || got["x.dotted"] != float64(1) || strings.Count(string(raw), `"model"`) != 1 {
		t.Errorf("extra did not replace model once: %s", raw)
	}
}

func TestSetScriptSwapsAtRuntime(t *testing.T) {
	t.Parallel()
	s := startMock(t, &Script{Default: &Answer{Content: "old"}}, Options{})
	ask := func() string {
		_, raw := post(t, s, "/v1/chat/completions", chatBody("m", "q", false), nil)
		return completionContent(t, raw)
	}
	if got := ask(); got != "old" {
		t.Fatalf("got %q", got)
	}
	if err := s.SetScript(&Script{Rules: []Rule{{Match: Match{LastUser: "("}, Answer: &Answer{}}}}); err == nil {
		t.Fatal("an invalid script was accepted")
	}
	if got := ask(); got != "old" {
		t.Errorf("after a rejected script the answer is %q, want the old one", got)
	}
	if err := s.SetScript(&Script{Default: &Answer{Content: "new"}}); err != nil {
		t.Fatal(err)
	}
	if got := ask(); got != "new" {
		t.Errorf("after SetScript the answer is %q, want new", got)
	}
	if err := s.SetScript(nil); err != nil {
		t.Fatal(err)
	}
	if got := ask(); got != "mock answer: q" {
		t.Errorf("with no script the answer is %q, want the built-in echo", got)
	}
}

func TestConcurrentRequestsAreRecordedOnce(t *testing.T) {
	t.Parallel()
	s := startMock(t, nil, Options{})
	const n = 50
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			_, raw := post(t, s, "/v1/chat/completions", chatBody("m", fmt.Sprint("q", i), false), nil)
			var c struct{ ID string }
			_ = json.Unmarshal(raw, &c)
			ids[i] = c.ID
		})
	}
	wg.Wait()
	recs, err := s.WaitFor(n, 5*time.Second)
	if err != nil || len(recs) != n {
		t.Fatalf("recorded %d of %d: %v", len(recs), n, err)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || !strings.HasPrefix(id, "chatcmpl-mock-") {
			t.Errorf("completion id %q repeated or malformed", id)
		}
		seen[id] = true
	}
}

func TestRecordingOff(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.WaitFor(2, 10*time.Second)
		done <- err
	}()
	post(t, s, "/v1/chat/completions", chatBody("m", "a", false), nil)
	post(t, s, "/v1/chat/completions", chatBody("m", "b", true), nil)
	if err := <-done; err != nil {
		t.Errorf("WaitFor without recording: %v", err)
	}
	if recs := s.Requests(); len(recs) != 0 {
		t.Errorf("recorded %d requests with Record off", len(recs))
	}
	if _, err := s.WaitFor(3, 50*time.Millisecond); err == nil {
		t.Error("WaitFor(3) returned without a third request")
	}
}

func TestWaitForStartedSeesARequestInFlight(t *testing.T) {
	t.Parallel()
	s := startMock(t, &Script{Default: &Answer{Content: "late", Latency: time.Minute}}, Options{Record: true})
	if err := s.WaitForStarted(1, 50*time.Millisecond); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("WaitForStarted(1) with no request: %v", err)
	}
	cancel := postInFlight(s)
	defer cancel()
	if err := s.WaitForStarted(1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("the request in flight was recorded as finished (%d records)", n)
	}
	cancel()
	if _, err := s.WaitFor(1, 10*time.Second); err != nil {
		t.Fatalf("the cancelled request never finished: %v", err)
	}
	s.Reset()
	if err := s.WaitForStarted(1, 10*time.Millisecond); err == nil {
		t.Fatal("Reset kept the started count")
	}
}

// WaitIdle returns once every request that reached the mock is finished and
// recorded, and times out while one is still in flight.
func TestWaitIdleWaitsForTheRequestsInFlight(t *testing.T) {
	t.Parallel()
	s := startMock(t, &Script{Default: &Answer{Content: "late", Latency: time.Minute}}, Options{Record: true})
	if err := s.WaitIdle(10 * time.Millisecond); err != nil {
		t.Fatalf("WaitIdle with no request: %v", err)
	}
	cancel := postInFlight(s)
	defer cancel()
	if err := s.WaitForStarted(1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitIdle(50 * time.Millisecond); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("WaitIdle with a request in flight: %v, want a timeout", err)
	}
	cancel()
	if err := s.WaitIdle(10 * time.Second); err != nil {
		t.Fatalf("WaitIdle after the request ended: %v", err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Fatalf("%d records after WaitIdle, want the one request", n)
	}
}

// postInFlight sends a chat completion to s from a goroutine; cancel ends it.
func postInFlight(s *Server) (cancel func()) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(chatBody("m", "q", false)))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	return cancel
}
