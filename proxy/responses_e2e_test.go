package proxy

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// The Responses API (POST /v1/responses) end to end: openai-go's Responses client
// against the proxy in front of the mock upstream, on an upstream that speaks chat
// completions only (api: chat, the request is translated) and on one that serves
// the Responses API itself (api: responses).

// responsesConfig routes the same mock twice: chatup as a chat-only provider,
// respup as a Responses-capable one. plain-* routes have no interceptors; ra3-*
// validate the RA3 pack with injection and the hidden revision, and answer with
// the alias.
const responsesConfig = `
server: {keepalive_interval: 150ms}
log: {level: warn}
upstreams:
  chatup: {base_url: "%MOCK%", read_timeout: 5s}
  respup: {base_url: "%MOCK%", read_timeout: 5s, api: responses}
routes:
  - {name: plain-chat, models: [plain-c], upstream: chatup, upstream_model: mock-c}
  - {name: plain-resp, models: [plain-r], upstream: respup, upstream_model: mock-r}
  - name: ra3-chat
    models: [ra3-c]
    upstream: chatup
    upstream_model: deepseek-chat
    response_model: alias
    pack: ra3
    inject: {}
    validate: {strip_claims: never}
  - name: ra3-resp
    models: [ra3-r]
    upstream: respup
    upstream_model: gpt-5
    response_model: alias
    pack: ra3
    inject: {}
    validate: {strip_claims: never}
`

// dialects are the two ways a Responses request reaches an upstream: the routes
// of responsesConfig by dialect, and the path the upstream is asked on.
var dialects = []struct {
	name, held, plain, path string
}{
	{"api chat", "ra3-c", "plain-c", "/v1/chat/completions"},
	{"api responses", "ra3-r", "plain-r", "/v1/responses"},
}

const storyInstructions = "你是红警 3 录像分析助手。"

// responsesClient is openai-go pointed at the proxy; the last response's headers
// land in *hdr.
func responsesClient(h *harness, hdr *http.Header) oa.Client {
	opts := []option.RequestOption{option.WithBaseURL(h.base + "/v1/"), option.WithAPIKey("client-key"), option.WithMaxRetries(0)}
	if hdr != nil {
		opts = append(opts, option.WithHTTPClient(&http.Client{Transport: headerTap{next: http.DefaultTransport, last: hdr}}))
	}
	return oa.NewClient(opts...)
}

// storyParams is the story request as a Responses request: the app's instructions
// and the replay in an input_text part of a message item.
func storyParams(model string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:        model,
		Instructions: oa.String(storyInstructions),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				responses.ResponseInputContentParamOfInputText("分析这局录像。\n\n" + replayText),
			}, responses.EasyInputMessageRoleUser),
		}},
	}
}

// streamed is what a streaming Responses client saw.
type streamed struct {
	text      string // the output_text deltas joined
	events    []string
	final     *responses.Response // the terminal event's response
	args      map[string]string   // function call arguments by item id, from the deltas
	streamErr error
}

// streamResponses sends params streaming and collects the events, checking that
// sequence numbers count up from 0 and that every output_text.done carries the
// text its deltas built.
func streamResponses(t *testing.T, c oa.Client, params responses.ResponseNewParams) streamed {
	t.Helper()
	s := c.Responses.NewStreaming(context.Background(), params)
	var out streamed
	out.args = map[string]string{}
	var b strings.Builder
	part := map[string]*strings.Builder{}
	want := int64(0)
	for s.Next() {
		ev := s.Current()
		out.events = append(out.events, ev.Type)
		if ev.SequenceNumber != want {
			t.Errorf("event %d (%s) has sequence_number %d", want, ev.Type, ev.SequenceNumber)
		}
		want++
		switch ev.Type {
		case "response.output_text.delta":
			b.WriteString(ev.Delta)
			key := ev.ItemID + "/" + string(rune('0'+ev.ContentIndex))
			if part[key] == nil {
				part[key] = &strings.Builder{}
			}
			part[key].WriteString(ev.Delta)
		case "response.output_text.done":
			key := ev.ItemID + "/" + string(rune('0'+ev.ContentIndex))
			got := ""
			if part[key] != nil {
				got = part[key].String()
			}
			if ev.Text != got {
				t.Errorf("output_text.done carries %q, its deltas built %q", ev.Text, got)
			}
		case "response.function_call_arguments.delta":
			out.args[ev.ItemID] += ev.Delta
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			out.final = &r
		}
	}
	out.streamErr = s.Err()
	out.text = b.String()
	return out
}

func TestResponsesRoutingAndAliasMapping(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {content: "plain answer", reasoning: "thinking it over"}`, responsesConfig)
	c := responsesClient(h, nil)
	ctx := context.Background()
	tests := []struct {
		desc, model, path, upstreamModel string
	}{
		{"a route without interceptors on a Responses upstream forwards with the alias mapped", "plain-r", "/v1/responses", "mock-r"},
		{"a route without interceptors on a chat upstream translates", "plain-c", "/v1/chat/completions", "mock-c"},
		{"a validating route on a Responses upstream", "ra3-r", "/v1/responses", "gpt-5"},
		{"a validating route on a chat upstream", "ra3-c", "/v1/chat/completions", "deepseek-chat"},
	}
	for _, tc := range tests {
		h.mock.Reset()
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: tc.model,
			Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("hello")},
		})
		if err != nil {
			t.Errorf("%s: %v", tc.desc, err)
			continue
		}
		if got := r.OutputText(); got != "plain answer" {
			t.Errorf("%s: output_text %q", tc.desc, got)
		}
		if r.Status != "completed" || r.Object != "response" {
			t.Errorf("%s: status %q object %q", tc.desc, r.Status, r.Object)
		}
		// The reasoning comes as a reasoning item's summary (on a chat upstream: its
		// reasoning_content).
		if r.Output[0].Type != "reasoning" || len(r.Output[0].Summary) != 1 || r.Output[0].Summary[0].Text != "thinking it over" {
			t.Errorf("%s: output %s", tc.desc, r.RawJSON())
		}
		recs, _ := h.mock.WaitFor(1, 3*time.Second)
		if len(recs) != 1 {
			t.Errorf("%s: the upstream got %d requests", tc.desc, len(recs))
			continue
		}
		if recs[0].Path != tc.path {
			t.Errorf("%s: the upstream was asked on %s, want %s", tc.desc, recs[0].Path, tc.path)
		}
		if m := gjson.GetBytes(recs[0].Body, "model").Str; m != tc.upstreamModel {
			t.Errorf("%s: the upstream saw model %q, want %q", tc.desc, m, tc.upstreamModel)
		}
		if tc.path == "/v1/chat/completions" {
			if u := gjson.GetBytes(recs[0].Body, `messages.#(role=="user").content`).Str; u != "hello" {
				t.Errorf("%s: the chat request's user message is %q: %s", tc.desc, u, recs[0].Body)
			}
			// input_tokens are the chat answer's prompt_tokens: one message.
			if r.Usage.InputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
				t.Errorf("%s: usage %+v", tc.desc, r.Usage)
			}
		}
	}
	// A model no route serves, on a config without a default route, is routed as a
	// chat completion is: 404 model_not_found, and no upstream is asked.
	h.mock.Reset()
	for _, path := range []string{"/v1/responses", "/v1/chat/completions"} {
		status, _, body := h.post(t, path, `{"model":"not-routed","input":"hello","messages":[{"role":"user","content":"hello"}]}`)
		if status != 404 || gjson.GetBytes(body, "error.code").Str != "model_not_found" || gjson.GetBytes(body, "error.param").Str != "model" {
			t.Errorf("%s for a model no route serves: %d %s, want 404 model_not_found", path, status, body)
		}
	}
	if n := len(h.mock.Requests()); n != 0 {
		t.Errorf("the upstream was asked %d times for a model no route serves", n)
	}
}

func TestResponsesInjectionGoesIntoInstructions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {content: "ok"}`, responsesConfig)
	c := responsesClient(h, nil)
	for _, d := range dialects {
		h.mock.Reset()
		params := storyParams(d.held)
		params.Metadata = map[string]string{"app": "replays", "factgate.session": "s-1"}
		if _, err := c.Responses.New(context.Background(), params, option.WithJSONSet("x_app_extension", map[string]any{"keep": true})); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		recs, _ := h.mock.WaitFor(1, 3*time.Second)
		body := recs[0].Body
		var system string
		if d.path == "/v1/responses" {
			system = gjson.GetBytes(body, "instructions").Str
			if got := gjson.GetBytes(body, "input").Raw; !strings.Contains(got, `"input_text"`) || !strings.Contains(got, "PlayerA") {
				t.Errorf("%s: the input did not reach the upstream as sent: %.200s", d.name, got)
			}
			if !gjson.GetBytes(body, "x_app_extension.keep").Bool() {
				t.Errorf("%s: an unknown field was lost: %s", d.name, body)
			}
		} else {
			msgs := gjson.GetBytes(body, "messages").Array()
			if len(msgs) != 2 || msgs[0].Get("role").Str != "system" || msgs[1].Get("role").Str != "user" {
				t.Fatalf("%s: the chat request's messages: %.300s", d.name, gjson.GetBytes(body, "messages").Raw)
			}
			system = msgs[0].Get("content").Str
			if !strings.Contains(msgs[1].Get("content.0.text").Str, "PlayerA") {
				t.Errorf("%s: the replay is not in the user message", d.name)
			}
			if !gjson.GetBytes(body, "x_app_extension.keep").Bool() {
				t.Errorf("%s: a provider extension was not carried: %s", d.name, body)
			}
		}
		if !strings.Contains(system, reviseMarker) || !strings.Contains(system, "## 应用的补充要求\n\n"+storyInstructions) {
			t.Errorf("%s: the system prompt does not carry the knowledge, the contract and the app's instructions merged:\n%.400s", d.name, system)
		}
		if strings.Count(system, storyInstructions) != 1 {
			t.Errorf("%s: the app's instructions appear %d times", d.name, strings.Count(system, storyInstructions))
		}
		if md := gjson.GetBytes(body, "metadata"); md.Get("app").Str != "replays" || md.Get(`factgate\.session`).Exists() {
			t.Errorf("%s: metadata upstream %s, want the app's keys without factgate's", d.name, md.Raw)
		}
	}
}

func TestResponsesHiddenRevisionOnBothDialects(t *testing.T) {
	t.Parallel()
	draftUsage := map[string]int{"prompt_tokens": 9000, "completion_tokens": 400}
	fixUsage := map[string]int{"prompt_tokens": 9700, "completion_tokens": 420}
	script := reviseScript(answerJSON{Content: storyDraftAnswer, Usage: draftUsage}, answerJSON{Content: storyFixedAnswer, Usage: fixUsage})
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, script, responsesConfig)
			var hdr http.Header
			c := responsesClient(h, &hdr)
			r, err := c.Responses.New(context.Background(), storyParams(d.held))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.OutputText(); got != storyFixedAnswer {
				t.Errorf("the client got:\n%s\nwant the revision", got)
			}
			if got := hdr.Get("X-Factgate-Revisions"); got != "1" {
				t.Errorf("X-Factgate-Revisions %q, want 1", got)
			}
			if r.Model != d.held {
				t.Errorf("model %q, want the alias (response_model: alias)", r.Model)
			}
			if got := hdr.Get("X-Factgate-Issues"); !strings.HasPrefix(got, "draft=C") || !strings.HasSuffix(got, "final=0;delivered=0") {
				t.Errorf("X-Factgate-Issues %q", got)
			}
			if r.Usage.InputTokens != 18700 || r.Usage.OutputTokens != 820 || r.Usage.TotalTokens != 19520 {
				t.Errorf("usage %+v, want both calls summed", r.Usage)
			}
			recs, _ := h.mock.WaitFor(2, 3*time.Second)
			if len(recs) != 2 {
				t.Fatalf("the upstream got %d requests, want the draft and one revision", len(recs))
			}
			for _, rec := range recs {
				if rec.Path != d.path {
					t.Errorf("a call went to %s, want %s", rec.Path, d.path)
				}
			}
			rev := recs[1].Body
			if d.path == "/v1/responses" {
				in := gjson.GetBytes(rev, "input").Array()
				if len(in) != 3 || in[1].Get("role").Str != "assistant" || in[1].Get("content").Str != storyDraftAnswer || in[2].Get("role").Str != "user" {
					t.Errorf("the revision request's input: %.600s", gjson.GetBytes(rev, "input").Raw)
				}
				if gjson.GetBytes(rev, "store").Raw != "false" {
					t.Errorf("a hidden revision must not be stored by the provider: store %s", gjson.GetBytes(rev, "store").Raw)
				}
				if gjson.GetBytes(rev, "instructions").Str != gjson.GetBytes(recs[0].Body, "instructions").Str {
					t.Error("the revision request's instructions differ from the draft's")
				}
				// The client gets the upstream's own response object of the draft.
				if !strings.HasPrefix(r.ID, "resp_mock_") {
					t.Errorf("response id %q, want the upstream's", r.ID)
				}
			} else {
				msgs := gjson.GetBytes(rev, "messages").Array()
				if len(msgs) != 4 || msgs[2].Get("content").Str != storyDraftAnswer {
					t.Errorf("the revision request's messages: %.600s", gjson.GetBytes(rev, "messages").Raw)
				}
			}
			tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
			if tr.Get("final.outcome").Str != "resolved" {
				t.Errorf("trace outcome %q", tr.Get("final.outcome").Str)
			}

			h.mock.Reset()
			st := streamResponses(t, c, storyParams(d.held))
			if st.streamErr != nil {
				t.Fatalf("stream: %v", st.streamErr)
			}
			if st.text != r.OutputText() {
				t.Errorf("streamed text differs from the non-streamed answer:\n%s\n--- non-streamed ---\n%s", st.text, r.OutputText())
			}
			if st.final == nil || st.final.OutputText() != r.OutputText() || st.final.Usage.TotalTokens != r.Usage.TotalTokens {
				t.Errorf("the terminal event's response differs from the non-streamed one")
			}
			if n := len(st.events); n < 4 || st.events[0] != "response.created" || st.events[1] != "response.in_progress" || st.events[n-1] != "response.completed" {
				t.Errorf("events %v", st.events)
			}

			// The facts of a plain string input are checked as well.
			h.mock.Reset()
			hdr = nil
			r, err = c.Responses.New(context.Background(), responses.ResponseNewParams{Model: d.held,
				Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("分析这局录像。\n\n" + replayText)}})
			if err != nil {
				t.Fatal(err)
			}
			if r.OutputText() != storyFixedAnswer || hdr.Get("X-Factgate-Revisions") != "1" {
				t.Errorf("a string input: revisions %q, text:\n%s", hdr.Get("X-Factgate-Revisions"), r.OutputText())
			}
		})
	}
}

func TestResponsesStreamHeldWithKeepAlivesAndLateHeaders(t *testing.T) {
	t.Parallel()
	// The draft takes far longer than a keep-alive interval (1s against 150ms): the
	// stream is committed, kept alive, and the revision headers come as comments
	// before the end.
	script := `
rules:
  - match: {has_assistant: true}
    answer: {content: "` + jsonEscapeYAML(storyFixedAnswer) + `"}
default:
  content: "` + jsonEscapeYAML(storyDraftAnswer) + `"
  latency: 1s
`
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, script, responsesConfig)
			params := storyParams(d.held)
			body, _ := params.MarshalJSON()
			req, _ := http.NewRequest("POST", h.base+"/v1/responses", strings.NewReader(strings.Replace(string(body), "{", `{"stream":true,`, 1)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("Content-Type %q", ct)
			}
			if resp.Header.Get("X-Factgate-Trace-Id") == "" {
				t.Error("no X-Factgate-Trace-Id on the held stream's headers")
			}
			var lines []string
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<22)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			all := strings.Join(lines, "\n")
			// A keep-alive is a blank line, before the first event.
			ka := -1
			if len(lines) > 0 && lines[0] == "" {
				ka = 0
			}
			created := strings.Index(all, "event: response.created")
			revisions := strings.Index(all, ": X-Factgate-Revisions: 1")
			completed := strings.Index(all, "event: response.completed")
			if ka < 0 || created < ka {
				t.Errorf("no keep-alive before the answer:\n%.300s", all)
			}
			if revisions < 0 || completed < revisions {
				t.Errorf("the revision headers are not told before response.completed:\n%s", all[max(0, len(all)-800):])
			}
			if strings.Contains(all, "[DONE]") {
				t.Error("a Responses stream has no [DONE]")
			}
		})
	}
}

// jsonEscapeYAML escapes s for a double-quoted YAML string.
func jsonEscapeYAML(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return r.Replace(s)
}

func TestResponsesToolCallsPassThrough(t *testing.T) {
	t.Parallel()
	script := `
rules:
  - match: {last_user: "weather", has_assistant: false}
    answer:
      tool_calls:
        - id: call_1
          function: {name: get_weather, arguments: '{"city":"Paris"}'}
  - match: {has_assistant: true, any_message: "\"temp\""}
    answer: {content: "It is 18 °C in Paris."}
`
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
	}, true)
	for _, d := range dialects {
		for _, model := range []string{d.plain, d.held} {
			t.Run(d.name+"/"+model, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, script, responsesConfig)
				c := responsesClient(h, nil)
				ask := responses.ResponseInputItemParamOfMessage("What's the weather in Paris?", responses.EasyInputMessageRoleUser)
				r, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
					Model: model,
					Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask}},
					Tools: []responses.ToolUnionParam{tool},
				})
				if err != nil {
					t.Fatal(err)
				}
				var call responses.ResponseFunctionToolCall
				for _, item := range r.Output {
					if item.Type == "function_call" {
						call = item.AsFunctionCall()
					}
				}
				if call.CallID != "call_1" || call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` {
					t.Fatalf("function call %+v; output %s", call, r.RawJSON())
				}
				recs, _ := h.mock.WaitFor(1, 3*time.Second)
				if d.path == "/v1/chat/completions" {
					if n := gjson.GetBytes(recs[0].Body, "tools.0.function.name").Str; n != "get_weather" || !gjson.GetBytes(recs[0].Body, "tools.0.function.strict").Bool() {
						t.Errorf("the chat request's tools: %s", gjson.GetBytes(recs[0].Body, "tools").Raw)
					}
				}

				// The streamed call carries the same arguments.
				st := streamResponses(t, c, responses.ResponseNewParams{
					Model: model,
					Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask}},
					Tools: []responses.ToolUnionParam{tool},
				})
				if st.streamErr != nil {
					t.Fatal(st.streamErr)
				}
				if len(st.args) != 1 {
					t.Errorf("streamed function call arguments %v", st.args)
				}
				for _, a := range st.args {
					if a != `{"city":"Paris"}` {
						t.Errorf("streamed arguments %q", a)
					}
				}

				// The tool's result goes back as a function_call_output item.
				h.mock.Reset()
				r2, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
					Model: model,
					Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
						ask,
						responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
						{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
							CallID: oa.String(call.CallID),
							Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oa.String(`{"temp":18}`)},
						}},
					}},
					Tools: []responses.ToolUnionParam{tool},
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := r2.OutputText(); got != "It is 18 °C in Paris." {
					t.Errorf("final answer %q", got)
				}
				recs, _ = h.mock.WaitFor(1, 3*time.Second)
				if d.path == "/v1/chat/completions" {
					msgs := gjson.GetBytes(recs[0].Body, "messages").Array()
					if len(msgs) != 3 || msgs[1].Get("tool_calls.0.id").Str != "call_1" || msgs[1].Get("tool_calls.0.function.name").Str != "get_weather" ||
						msgs[2].Get("role").Str != "tool" || msgs[2].Get("tool_call_id").Str != "call_1" || msgs[2].Get("content").Str != `{"temp":18}` {
						t.Errorf("the chat request's messages: %s", gjson.GetBytes(recs[0].Body, "messages").Raw)
					}
				}
			})
		}
	}
}

func TestResponsesFieldsAChatUpstreamCannotCarryAre400(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {content: "ok"}`, responsesConfig)
	c := responsesClient(h, nil)
	tests := []struct {
		desc   string
		params responses.ResponseNewParams
		param  string
	}{
		{"a stored conversation", responses.ResponseNewParams{PreviousResponseID: oa.String("resp_1")}, "previous_response_id"},
		{"a built-in tool", responses.ResponseNewParams{Tools: []responses.ToolUnionParam{responses.ToolParamOfWebSearch(responses.WebSearchToolTypeWebSearch)}}, "tools[0].type"},
		{"storing", responses.ResponseNewParams{Store: oa.Bool(true)}, "store"},
		{"an item reference", responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{responses.ResponseInputItemParamOfItemReference("msg_1")}}}, "input[0]"},
	}
	for _, tc := range tests {
		for _, model := range []string{"ra3-c", "plain-c"} {
			h.mock.Reset()
			p := tc.params
			p.Model = model
			if p.Input.OfInputItemList == nil {
				p.Input = responses.ResponseNewParamsInputUnion{OfString: oa.String("hello")}
			}
			_, err := c.Responses.New(context.Background(), p)
			var apiErr *oa.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tc.param || apiErr.Code != "unsupported_parameter" ||
				!strings.Contains(apiErr.Message, tc.param) || !strings.Contains(apiErr.Message, "chatup") {
				t.Errorf("%s on %s: %v (%+v), want 400 unsupported_parameter naming %s", tc.desc, model, err, apiErr, tc.param)
			}
			if n := len(h.mock.Requests()); n != 0 {
				t.Errorf("%s on %s: the upstream got %d requests", tc.desc, model, n)
			}
			// A Responses upstream takes it as it is.
			if tc.param == "previous_response_id" {
				p.Model = strings.Replace(model, "-c", "-r", 1)
				if _, err := c.Responses.New(context.Background(), p); err != nil {
					t.Errorf("%s on %s: %v", tc.desc, p.Model, err)
				}
				recs, _ := h.mock.WaitFor(1, 3*time.Second)
				if len(recs) != 1 || gjson.GetBytes(recs[0].Body, "previous_response_id").Str != "resp_1" {
					t.Errorf("%s on %s: previous_response_id did not reach the upstream", tc.desc, p.Model)
				}
			}
		}
	}
}

func TestResponsesOtherPathsPassThrough(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {content: "stored answer"}`, responsesConfig)
	c := responsesClient(h, nil)
	ctx := context.Background()
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "plain-r", Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("remember me")}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatalf("GET /v1/responses/%s: %v", r.ID, err)
	}
	if got.ID != r.ID || got.OutputText() != "stored answer" {
		t.Errorf("GET returned %s %q", got.ID, got.OutputText())
	}
	items, err := c.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatalf("input_items: %v", err)
	}
	if len(items.Data) != 1 || items.Data[0].Type != "message" {
		t.Errorf("input items %s", items.RawJSON())
	}
	if err := c.Responses.Delete(ctx, r.ID); err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	_, err = c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	var apiErr *oa.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("GET after DELETE: %v, want the upstream's 404", err)
	}
	for _, rec := range h.mock.Requests()[1:] {
		if !strings.HasPrefix(rec.Path, "/v1/responses/"+r.ID) {
			t.Errorf("the upstream was asked on %s", rec.Path)
		}
	}
}

func TestResponsesErrorsKeepTheEnvelope(t *testing.T) {
	t.Parallel()
	script := `
rules:
  - match: {last_user: "^limit"}
    answer:
      fault:
        status: 429
        body: '{"error":{"message":"slow down","type":"rate_limit","param":null,"code":"rate_limit_exceeded"}}'
  - match: {last_user: "^late failure"}
    answer:
      latency: 500ms
      fault:
        status: 500
        body: '{"error":{"message":"upstream exploded","type":"server_error","param":null,"code":"boom"}}'
`
	h := newHarness(t, script, responsesConfig)
	c := responsesClient(h, nil)
	ctx := context.Background()
	for _, d := range dialects {
		for _, model := range []string{d.plain, d.held} {
			// An upstream error before anything was sent passes through unchanged.
			_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("limit me")}})
			var apiErr *oa.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" || apiErr.Message != "slow down" {
				t.Errorf("%s: %v, want the upstream's 429 as it came", model, err)
			}
			// A held stream that fails after its headers went out ends with an error
			// event the SDK raises.
			if model == d.plain && d.path == "/v1/responses" {
				continue // relayed as the upstream answers: its 500 comes before any byte
			}
			// An analysis: its answer is held (one the pack is not about is relayed
			// live, and its error comes as the upstream's status).
			st := streamResponses(t, c, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("late failure\n" + analysisUser())}})
			if st.streamErr == nil || !strings.Contains(st.streamErr.Error(), "upstream exploded") {
				t.Errorf("%s: stream error %v, want the upstream's error raised", model, st.streamErr)
			}
		}
	}
	// factgate's own errors use the envelope too.
	status, _, body := h.post(t, "/v1/responses", `{"model":"ra3-c","input":"x","previous_response_id":"resp_1"}`)
	if status != 400 || gjson.GetBytes(body, "error.param").Str != "previous_response_id" || gjson.GetBytes(body, "error.type").Str != "invalid_request_error" {
		t.Errorf("%d %s", status, body)
	}
	status, _, body = h.post(t, "/v1/responses", `{"input":"x"}`)
	if status != 400 || gjson.GetBytes(body, "error.code").Str != "missing_model" {
		t.Errorf("%d %s", status, body)
	}
}

func TestResponsesIncompleteAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `default: {content: "cut sho", finish_reason: length}`, responsesConfig)
	c := responsesClient(h, nil)
	for _, d := range dialects {
		for _, model := range []string{d.plain, d.held} {
			r, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: model, MaxOutputTokens: oa.Int(2),
				Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("hello")}})
			if err != nil {
				t.Fatalf("%s: %v", model, err)
			}
			if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || r.OutputText() != "cut sho" {
				t.Errorf("%s: status %q, incomplete_details %q, text %q", model, r.Status, r.IncompleteDetails.Reason, r.OutputText())
			}
			if r.MaxOutputTokens != 2 {
				t.Errorf("%s: max_output_tokens %d", model, r.MaxOutputTokens)
			}
			st := streamResponses(t, c, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("hello")}})
			if st.streamErr != nil || st.events[len(st.events)-1] != "response.incomplete" || st.text != "cut sho" {
				t.Errorf("%s: stream %v, events %v", model, st.streamErr, st.events)
			}
		}
	}
	carried := 0
	for _, r := range h.mock.Requests() {
		if r.Path == "/v1/chat/completions" && gjson.GetBytes(r.Body, "max_tokens").Int() == 2 {
			carried++
		}
	}
	if carried != 2 {
		t.Errorf("max_output_tokens became max_tokens in %d chat requests, want 2 (the non-streamed ones)", carried)
	}
}

func TestResponsesExperimentVariantsReachTheUpstream(t *testing.T) {
	t.Parallel()
	const config = `
log: {level: warn}
upstreams:
  chatup: {base_url: "%MOCK%", read_timeout: 5s}
  respup: {base_url: "%MOCK%", read_timeout: 5s, api: responses}
routes:
  - name: ab-chat
    models: [ab-c]
    upstream: chatup
    inject: {custom_system_prompt: "house rules", use_custom_system_prompt: true, when: always}
    experiment: &exp
      name: strictness
      allow_forcing: true
      control: baseline
      variants:
        - {name: baseline, weight: 50}
        - {name: strict, weight: 50, temperature: 0.2, max_tokens: 300, sampling: {reasoning_effort: low}}
  - name: ab-resp
    models: [ab-r]
    upstream: respup
    inject: {custom_system_prompt: "house rules", use_custom_system_prompt: true, when: always}
    experiment: *exp
`
	h := newHarness(t, `default: {content: "ok"}`, config)
	var hdr http.Header
	c := responsesClient(h, &hdr)
	for _, model := range []string{"ab-c", "ab-r"} {
		h.mock.Reset()
		_, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: model, Temperature: oa.Float(0.9),
			Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("hello")}}, option.WithHeader("X-Factgate-Variant", "strict"))
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if v := hdr.Get("X-Factgate-Variant"); v != "strict" {
			t.Errorf("%s: X-Factgate-Variant %q", model, v)
		}
		recs, _ := h.mock.WaitFor(1, 3*time.Second)
		body := gjson.ParseBytes(recs[0].Body)
		if body.Get("temperature").Raw != "0.2" {
			t.Errorf("%s: temperature %s, want the variant's", model, body.Get("temperature").Raw)
		}
		if model == "ab-r" {
			if body.Get("max_output_tokens").Raw != "300" || body.Get("reasoning.effort").Str != "low" || body.Get("max_tokens").Exists() ||
				body.Get("reasoning_effort").Exists() || body.Get("instructions").Str != "house rules" {
				t.Errorf("%s: the Responses request does not carry the variant under its names: %s", model, recs[0].Body)
			}
		} else if body.Get("max_tokens").Raw != "300" || body.Get("reasoning_effort").Str != "low" || body.Get("messages.0.content").Str != "house rules" {
			t.Errorf("%s: the chat request does not carry the variant: %s", model, recs[0].Body)
		}
	}
}

func TestResponsesClaimsBlockStrippedFromTheUpstreamsObject(t *testing.T) {
	t.Parallel()
	const config = `
log: {level: warn}
upstreams:
  respup: {base_url: "%MOCK%", read_timeout: 5s, api: responses}
routes:
  - {name: ra3, models: [ra3-r], upstream: respup, pack: ra3, inject: {}, validate: {}}
`
	clean := claimsAnswer("PlayerA 在 1:24 打包主基地。", claimBase)
	h := newHarness(t, `default: {content: "`+jsonEscapeYAML(clean)+`", extra: {x_provider: {region: eu}}}`, config)
	c := responsesClient(h, nil)
	r, err := c.Responses.New(context.Background(), storyParams("ra3-r"))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.OutputText(); got != "PlayerA 在 1:24 打包主基地。\n" {
		t.Errorf("output_text %q, want the prose without the claims block the proxy asked for", got)
	}
	raw := gjson.Parse(r.RawJSON())
	if !strings.HasPrefix(r.ID, "resp_mock_") || raw.Get("x_provider.region").Str != "eu" || raw.Get("store").Raw != "true" {
		t.Errorf("the upstream's own object was not kept: %s", r.RawJSON())
	}
}
