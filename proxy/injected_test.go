package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// Issue 27, item 2: what factgate injected (the knowledge and the claims
// contract) never reaches the client, in any field, on any path: not as the
// Responses object's instructions, not in an upstream error that quotes the
// request.

// injectedConfig adds to responsesConfig routes that inject into every request
// (inject.when: always), so that a greeting gets the knowledge too.
const injectedConfig = responsesConfig + `
  - name: always-resp
    models: [always-r]
    upstream: respup
    pack: ra3
    inject: {when: always}
    validate: {strip_claims: never}
  - name: always-chat
    models: [always-c]
    upstream: chatup
    pack: ra3
    inject: {when: always}
    validate: {strip_claims: never}
`

// injectedText is the prompt the upstream got on factgate's behalf in a recorded
// request: a Responses request's instructions, a chat request's first system
// message.
func injectedText(t *testing.T, body []byte) string {
	t.Helper()
	if in := gjson.GetBytes(body, "instructions"); in.Exists() {
		return in.Str
	}
	return gjson.GetBytes(body, `messages.#(role=="system").content`).Str
}

// leaks reports whether raw (a body or an event stream the client got) carries
// a piece of the injected prompt, as text or JSON-escaped.
func leaks(raw, injected string) string {
	for _, at := range []int{0, len(injected) / 2} {
		r := []rune(strings.ToValidUTF8(injected[at:], ""))
		piece := string(r[:min(len(r), 16)])
		escaped := string(rawjson.AppendString(nil, piece))
		escaped = escaped[1 : len(escaped)-1]
		if strings.Contains(raw, piece) || strings.Contains(raw, escaped) {
			return piece
		}
	}
	return ""
}

func TestInjectedPromptNeverEchoedAsInstructions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, framingScript, injectedConfig)
	for _, tc := range []struct{ model, input string }{
		{"ra3-r", analysisUser()},
		{"ra3-c", analysisUser()},
		{"always-r", "Say hello"},
		{"always-c", "Say hello"},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.model, stream), func(t *testing.T) {
				h.mock.Reset()
				body, _ := json.Marshal(map[string]any{"model": tc.model, "stream": stream, "instructions": storyInstructions, "input": tc.input})
				status, _, raw := h.post(t, "/v1/responses", string(body))
				if status != 200 {
					t.Fatalf("%d %s", status, raw)
				}
				recs, _ := h.mock.WaitFor(1, 3*time.Second)
				injected := injectedText(t, recs[0].Body)
				if len(injected) < 500 || !strings.Contains(injected, storyInstructions) {
					t.Fatalf("the upstream did not get the injected prompt with the app's merged: %.200s", injected)
				}
				var objects []gjson.Result
				if stream {
					events, _, err := readStrictSSE(string(raw))
					if err != nil {
						t.Fatal(err)
					}
					for _, ev := range events {
						if r := gjson.Get(ev.Data, "response"); r.Exists() {
							objects = append(objects, r)
						}
					}
				} else {
					objects = append(objects, gjson.ParseBytes(raw))
				}
				if len(objects) == 0 {
					t.Fatalf("no response object in %s", raw)
				}
				for _, o := range objects {
					if got := o.Get("instructions").Str; got != storyInstructions {
						t.Errorf("instructions %.120q, want the app's own %q", got, storyInstructions)
					}
				}
				if piece := leaks(string(raw), injected); piece != "" {
					t.Errorf("the client got a piece of the injected prompt (%q):\n%.600s", piece, raw)
				}
				// The provider stored the response with factgate's prompt as its
				// instructions; fetched through the proxy, it has the app's.
				id := objects[len(objects)-1].Get("id").Str
				if !strings.HasPrefix(tc.model, "ra3-r") && !strings.HasPrefix(tc.model, "always-r") {
					return // a chat upstream stores nothing
				}
				deadline := time.Now().Add(3 * time.Second)
				for {
					req, _ := http.NewRequest("GET", h.base+"/v1/responses/"+id, nil)
					req.Header.Set("Authorization", harnessCredential)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					stored, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					got := gjson.GetBytes(stored, "instructions").Str
					if resp.StatusCode == 200 && got == storyInstructions && leaks(string(stored), injected) == "" {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("GET /v1/responses/%s: %d, instructions %.80q", id, resp.StatusCode, got)
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
	}
}

// quotingUpstream answers every call with a 422 whose body quotes the request,
// as FastAPI-based servers (vLLM, LiteLLM) quote a request they refuse, after
// delay.
func quotingUpstream(t *testing.T, delay time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(delay)
		quoted := gjson.GetBytes(body, "messages.0").Raw
		if r.URL.Path == "/v1/responses" {
			quoted = gjson.GetBytes(body, "instructions").Raw
		}
		text := gjson.Get(quoted, "content").Str + gjson.Parse(quoted).Str
		out, _ := json.MarshalIndent(map[string]any{
			"error":  map[string]any{"message": "Input should be shorter: " + text[:min(len(text), 300)], "type": "invalid_request_error", "param": nil, "code": "invalid_value"},
			"detail": []any{map[string]any{"loc": []string{"body"}, "input": json.RawMessage(quoted), "echo": string(body)}},
		}, "", "  ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(422)
		_, _ = w.Write(append(out, '\n'))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestInjectedPromptNotInUpstreamErrorsThatQuoteTheRequest(t *testing.T) {
	t.Parallel()
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("after the stream's headers=%v", late), func(t *testing.T) {
			t.Parallel()
			// Early: the interval is far above the chain's time, so that a loaded
			// machine cannot commit the stream; late: the upstream answers after
			// six intervals, so that it is committed.
			delay, interval := time.Duration(0), "60s"
			if late {
				delay, interval = 600*time.Millisecond, "100ms"
			}
			up := quotingUpstream(t, delay)
			config := strings.ReplaceAll(injectedConfig, "%MOCK%", up.URL+"/v1")
			config = strings.Replace(config, "keepalive_interval: 150ms", "keepalive_interval: "+interval, 1)
			h := newHarness(t, "", config)
			for _, tc := range []struct{ path, model, body string }{
				{"/v1/chat/completions", "ra3-c", `{"model":"ra3-c","stream":%v,"messages":[{"role":"system","content":"` + storyInstructions + `"},{"role":"user","content":` + yamlString(analysisUser()) + `}]}`},
				{"/v1/chat/completions", "ra3-r", `{"model":"ra3-r","stream":%v,"messages":[{"role":"user","content":` + yamlString(analysisUser()) + `}]}`},
				{"/v1/responses", "ra3-r", `{"model":"ra3-r","stream":%v,"instructions":"` + storyInstructions + `","input":` + yamlString(analysisUser()) + `}`},
				{"/v1/responses", "ra3-c", `{"model":"ra3-c","stream":%v,"instructions":"` + storyInstructions + `","input":` + yamlString(analysisUser()) + `}`},
			} {
				for _, stream := range []bool{false, true} {
					if late && !stream {
						continue
					}
					status, _, raw := h.post(t, tc.path, fmt.Sprintf(tc.body, stream))
					what := fmt.Sprintf("%s %s stream=%v", tc.path, tc.model, stream)
					switch {
					case late:
						events, _, err := readStrictSSE(string(raw))
						if status != 200 || err != nil || len(events) == 0 || !gjson.Get(events[0].Data, "error").IsObject() {
							t.Errorf("%s: %d %v, want an error event: %.300s", what, status, err, raw)
						}
					case status != 422 || gjson.GetBytes(raw, "error.code").Str != "invalid_value":
						t.Errorf("%s: %d %.300s, want the upstream's 422", what, status, raw)
					}
					// The prompt factgate injected is what the upstream quoted; the
					// app's own words (its instructions, its replay) may stay.
					if piece := leaks(string(raw), knowledgeHead); piece != "" {
						t.Errorf("%s: the client got a piece of the injected prompt (%q):\n%.600s", what, piece, raw)
					}
					if !strings.Contains(string(raw), "Input should be shorter") {
						t.Errorf("%s: the upstream's message is gone: %.300s", what, raw)
					}
				}
			}
		})
	}
}

// knowledgeHead is how the RA3 knowledge factgate injects begins.
const knowledgeHead = "# 红色警戒 3"

func TestWithoutInjectedCutsEveryFormOfAQuote(t *testing.T) {
	t.Parallel()
	injected := "# 红色警戒 3 游戏知识\n\n## 通用规则\n- 证据优先：每个判断都必须来自操作记录中的事实。\n\"quoted\" and \\ back"
	asciiEscaped, _ := json.Marshal(map[string]string{"input": injected}) // Go escapes no CJK; Python's ensure_ascii does
	pyEscaped := strings.NewReplacer("红", `\u7ea2`, "色", `\u8272`).Replace(string(asciiEscaped))
	request, _ := json.Marshal(map[string]any{"messages": []any{map[string]string{"role": "system", "content": injected + "\n\nthe app's own"}}})
	for _, tc := range []struct {
		desc, body string
		same       bool
	}{
		{"no quote", `{"error":{"message":"too long","type":"invalid_request_error"}}`, true},
		{"quoted as a value", string(asciiEscaped), false},
		{"quoted with \\u escapes", pyEscaped, false},
		{"the request quoted as JSON text in a string", `{"error":{"message":"bad"},"body":` + yamlString(string(request)) + `}`, false},
		{"a text body", "cannot parse: " + injected + " (truncated)", false},
	} {
		got := withoutInjected([]byte(tc.body), injected)
		if tc.same {
			if string(got) != tc.body {
				t.Errorf("%s: %s, want the body unchanged", tc.desc, got)
			}
			continue
		}
		if strings.Contains(string(got), "游戏知识") || strings.Contains(string(got), `\u6e38`) || !strings.Contains(string(got), "[factgate: the ") {
			t.Errorf("%s: %s", tc.desc, got)
		}
		if strings.HasPrefix(tc.body, "{") && !json.Valid(got) {
			t.Errorf("%s: no longer JSON: %s", tc.desc, got)
		}
	}
	if got := withoutInjected([]byte(string(request)), injected); !strings.Contains(string(got), "the app's own") {
		t.Errorf("the client's own text went with the quote: %s", got)
	}
}
