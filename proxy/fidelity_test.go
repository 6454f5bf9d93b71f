package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
)

// Issue 11: on a held route (pack ra3, inject + validate + revise) everything a
// real app sends behaves as the provider would — tool calls, n > 1, JSON mode,
// requests that are not analyses, model aliases — through unmodified clients.

// heldConfig is the issue's held route; %ROUTE% adds route keys.
const heldConfig = `
server: {keepalive_interval: 150ms}
log: {level: warn}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 5s}
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    upstream_model: deepseek-chat
    pack: ra3
    inject: {%INJECT%}
    validate: {}
    revise: {}
%ROUTE%
  - name: default
    default: true
    upstream: mock
`

func heldRouteConfig(inject, route string) string {
	return strings.NewReplacer("%INJECT%", inject, "%ROUTE%", route).Replace(heldConfig)
}

// yamlString quotes s for a YAML script (JSON strings are YAML).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// seenChoice is what a client assembled of one choice.
type seenChoice struct {
	Content     string
	ContentNull bool
	Finish      string
	Calls       []seenCall
}

type seenCall struct{ ID, Type, Name, Args string }

// seen is one client's view of an answer.
type seen struct {
	Choices []seenChoice
	Model   string
	Header  http.Header
	// Order is the choice index of every streamed choice event, in order.
	Order []int
}

// chatTurn is one message of a test conversation.
type chatTurn struct {
	Role, Content string
	Calls         []seenCall // assistant tool calls
	CallID        string     // tool result's call id
}

// chatCase is one request through both clients.
type chatCase struct {
	Model          string
	Turns          []chatTurn
	N              int
	Tools          bool // offer the get_unit tool
	ResponseFormat string
}

var getUnitTool = goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
	Name: "get_unit", Description: "look a unit up", Parameters: json.RawMessage(`{"type":"object","properties":{"unit":{"type":"integer"}}}`)}}

// viaGo sends c with go-openai, streamed (with include_usage) or not.
func viaGo(t *testing.T, h *harness, c chatCase, stream bool) seen {
	t.Helper()
	var hdr http.Header
	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	cfg.HTTPClient = &http.Client{Transport: headerTap{next: http.DefaultTransport, last: &hdr}}
	client := goopenai.NewClientWithConfig(cfg)
	req := goopenai.ChatCompletionRequest{Model: c.Model, N: c.N}
	if c.Tools {
		req.Tools = []goopenai.Tool{getUnitTool}
	}
	if c.ResponseFormat != "" {
		req.ResponseFormat = &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatType(c.ResponseFormat)}
	}
	for _, turn := range c.Turns {
		m := goopenai.ChatCompletionMessage{Role: turn.Role, Content: turn.Content, ToolCallID: turn.CallID}
		for _, call := range turn.Calls {
			m.ToolCalls = append(m.ToolCalls, goopenai.ToolCall{ID: call.ID, Type: goopenai.ToolType(call.Type), Function: goopenai.FunctionCall{Name: call.Name, Arguments: call.Args}})
		}
		req.Messages = append(req.Messages, m)
	}
	ctx := context.Background()
	var out seen
	if !stream {
		resp, err := client.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatalf("go-openai: %v", err)
		}
		out.Model, out.Header = resp.Model, hdr
		for i, ch := range resp.Choices {
			if ch.Index != i {
				t.Fatalf("go-openai: choice %d has index %d", i, ch.Index)
			}
			sc := seenChoice{Content: ch.Message.Content, Finish: string(ch.FinishReason)}
			for _, call := range ch.Message.ToolCalls {
				sc.Calls = append(sc.Calls, seenCall{call.ID, string(call.Type), call.Function.Name, call.Function.Arguments})
			}
			out.Choices = append(out.Choices, sc)
		}
		return out
	}
	req.Stream = true
	req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	st, err := client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatalf("go-openai stream: %v", err)
	}
	defer st.Close()
	out.Header = hdr
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go-openai stream: %v", err)
		}
		out.Model = chunk.Model
		for _, ch := range chunk.Choices {
			for len(out.Choices) <= ch.Index {
				out.Choices = append(out.Choices, seenChoice{})
			}
			out.Order = append(out.Order, ch.Index)
			sc := &out.Choices[ch.Index]
			sc.Content += ch.Delta.Content
			if ch.FinishReason != "" {
				sc.Finish = string(ch.FinishReason)
			}
			for _, d := range ch.Delta.ToolCalls {
				if d.Index == nil {
					t.Fatalf("go-openai stream: a tool call delta without index")
				}
				for len(sc.Calls) <= *d.Index {
					sc.Calls = append(sc.Calls, seenCall{})
				}
				call := &sc.Calls[*d.Index]
				call.ID += d.ID
				call.Type += string(d.Type)
				call.Name += d.Function.Name
				call.Args += d.Function.Arguments
			}
		}
	}
	return out
}

// viaOA sends c with openai-go; a stream is assembled by its accumulator.
func viaOA(t *testing.T, h *harness, c chatCase, stream bool) seen {
	t.Helper()
	var hdr http.Header
	client := oa.NewClient(option.WithBaseURL(h.base+"/v1/"), option.WithAPIKey("client-key"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: headerTap{next: http.DefaultTransport, last: &hdr}}))
	params := oa.ChatCompletionNewParams{Model: c.Model}
	if c.N > 0 {
		params.N = oa.Int(int64(c.N))
	}
	if c.Tools {
		params.Tools = []oa.ChatCompletionToolUnionParam{oa.ChatCompletionFunctionTool(oa.FunctionDefinitionParam{
			Name: "get_unit", Parameters: oa.FunctionParameters{"type": "object", "properties": map[string]any{"unit": map[string]any{"type": "integer"}}}})}
	}
	switch c.ResponseFormat {
	case "json_object":
		params.ResponseFormat = oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &oa.ResponseFormatJSONObjectParam{}}
	case "":
	default:
		t.Fatalf("viaOA: response format %q", c.ResponseFormat)
	}
	for _, turn := range c.Turns {
		switch turn.Role {
		case "system":
			params.Messages = append(params.Messages, oa.SystemMessage(turn.Content))
		case "user":
			params.Messages = append(params.Messages, oa.UserMessage(turn.Content))
		case "tool":
			params.Messages = append(params.Messages, oa.ToolMessage(turn.Content, turn.CallID))
		case "assistant":
			m := oa.ChatCompletionAssistantMessageParam{}
			if turn.Content != "" {
				m.Content.OfString = oa.String(turn.Content)
			}
			for _, call := range turn.Calls {
				m.ToolCalls = append(m.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
					ID: call.ID, Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: call.Name, Arguments: call.Args}}})
			}
			params.Messages = append(params.Messages, oa.ChatCompletionMessageParamUnion{OfAssistant: &m})
		}
	}
	ctx := context.Background()
	var cc *oa.ChatCompletion
	out := seen{}
	if !stream {
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatalf("openai-go: %v", err)
		}
		cc = resp
	} else {
		params.StreamOptions = oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}
		st := client.Chat.Completions.NewStreaming(ctx, params)
		acc := oa.ChatCompletionAccumulator{}
		for st.Next() {
			chunk := st.Current()
			acc.AddChunk(chunk)
			for _, ch := range chunk.Choices {
				out.Order = append(out.Order, int(ch.Index))
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("openai-go stream: %v", err)
		}
		cc = &acc.ChatCompletion
	}
	out.Model, out.Header = cc.Model, hdr
	for _, ch := range cc.Choices {
		sc := seenChoice{Content: ch.Message.Content, Finish: ch.FinishReason, ContentNull: !stream && ch.Message.JSON.Content.Raw() == "null"}
		for _, call := range ch.Message.ToolCalls {
			sc.Calls = append(sc.Calls, seenCall{call.ID, string(call.Type), call.Function.Name, call.Function.Arguments})
		}
		out.Choices = append(out.Choices, sc)
	}
	return out
}

// allClients runs c through go-openai and openai-go, streamed and not; each
// result is named by its client.
func allClients(t *testing.T, h *harness, c chatCase) map[string]seen {
	t.Helper()
	out := map[string]seen{}
	for _, stream := range []bool{false, true} {
		h.mock.Reset()
		out[fmt.Sprintf("go-openai stream=%v", stream)] = viaGo(t, h, c, stream)
		h.mock.Reset()
		out[fmt.Sprintf("openai-go stream=%v", stream)] = viaOA(t, h, c, stream)
	}
	return out
}

func analysisUser() string { return "分析这局录像。\n\n" + replayText }

// unitCall is the tool call the scripted model makes during an analysis.
var unitCall = seenCall{"call_unit_733", "function", "get_unit", `{"unit":733}`}

// toolLoopScript: a request with the operation log and no tool result asks for a
// tool; once the tool answered, the model drafts the seed's overconfident
// analysis; its revision corrects it.
var toolLoopScript = `
rules:
  - name: revision
    match: {has_assistant: true, assistant: "\\[机器可读声明\\]"}
    answer: {content: ` + yamlString(storyFixedAnswer) + `}
  - name: after-the-tool
    match: {any_message: "^733: "}
    answer: {content: ` + yamlString(storyDraftAnswer) + `}
  - name: tool-step
    match: {any_message: "(?m)^地图"}
    answer:
      tool_calls: [{id: call_unit_733, function: {name: get_unit, arguments: '{"unit":733}'}}]
      chunk_size: 4
      headers: {x-request-id: req-tool-step}
  - name: hello
    match: {last_user: "^Say hello"}
    answer:
      tool_calls: [{id: call_greet, function: {name: greet, arguments: '{"name":"Ann"}'}}, {id: call_wave, function: {name: wave, arguments: '{}'}}]
`

func TestHeldRouteReturnsToolCallsAsTheUpstreamSentThem(t *testing.T) {
	t.Parallel()
	t.Run("held", func(t *testing.T) {
		t.Parallel()
		checkToolCallsReturned(t, newHarness(t, toolLoopScript, heldRouteConfig("", "")))
	})
	// With stream_reasoning the draft call streams: the tool calls are assembled
	// from the upstream's deltas.
	t.Run("stream_reasoning", func(t *testing.T) {
		t.Parallel()
		checkToolCallsReturned(t, newHarness(t, toolLoopScript, strings.Replace(heldRouteConfig("", ""), "pack: ra3", "pack: ra3\n    stream_reasoning: true", 1)))
	})
}

func checkToolCallsReturned(t *testing.T, h *harness) {
	for _, tc := range []struct {
		name  string
		turns []chatTurn
		want  seenChoice
	}{
		{"a tool step of an analysis", []chatTurn{{Role: "user", Content: analysisUser()}},
			seenChoice{ContentNull: true, Finish: "tool_calls", Calls: []seenCall{unitCall}}},
		{"two tool calls of another conversation", []chatTurn{{Role: "user", Content: "Say hello to Ann"}},
			seenChoice{ContentNull: true, Finish: "tool_calls", Calls: []seenCall{{"call_greet", "function", "greet", `{"name":"Ann"}`}, {"call_wave", "function", "wave", "{}"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for client, got := range allClients(t, h, chatCase{Model: "ra3-analyst", Turns: tc.turns, Tools: true}) {
				want := tc.want
				if !strings.HasPrefix(client, "openai-go stream=false") {
					want.ContentNull = false // only there can the test tell null from ""
				}
				if len(got.Choices) != 1 || !reflect.DeepEqual(got.Choices[0], want) {
					t.Errorf("%s saw %+v, want %+v", client, got.Choices, want)
				}
				if r, i := got.Header.Get("X-Factgate-Revisions"), got.Header.Get("X-Factgate-Issues"); (r != "" && r != "0") || i != "" {
					t.Errorf("%s: a tool step was validated or revised: X-Factgate-Revisions %q, X-Factgate-Issues %q", client, r, i)
				}
			}
			// allClients resets the mock before each request: the last one made one call.
			if _, err := h.mock.WaitFor(1, 3*time.Second); err != nil {
				t.Fatal(err)
			}
			if n := h.chatRequests(); n != 1 {
				t.Errorf("the upstream received %d chat completions for a tool step, want 1 (no hidden call)", n)
			}
			// The body is the upstream's: choices and usage byte for byte.
			body, _ := json.Marshal(map[string]any{"model": "ra3-analyst", "messages": []map[string]string{{"role": tc.turns[0].Role, "content": tc.turns[0].Content}}})
			status, _, raw := h.post(t, "/v1/chat/completions", string(body))
			choices := gjson.GetBytes(raw, "choices").Raw
			if status != 200 || !strings.HasPrefix(choices, `[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"`+tc.want.Calls[0].ID+`","type":"function","function":{"name":"`) ||
				!strings.HasSuffix(choices, `]},"logprobs":null,"finish_reason":"tool_calls"}]`) || !strings.HasSuffix(string(raw), `"total_tokens":`+gjson.GetBytes(raw, "usage.total_tokens").Raw+`}}`) {
				t.Errorf("the body is not the upstream's: %d %s", status, raw)
			}
		})
	}
}

func TestHeldRouteValidatesTheFinalAnswerOfAToolLoop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, toolLoopScript, heldRouteConfig("", ""))
	loop := chatCase{Model: "ra3-analyst", Tools: true, Turns: []chatTurn{
		{Role: "user", Content: analysisUser()},
		{Role: "assistant", Calls: []seenCall{unitCall}},
		{Role: "tool", CallID: unitCall.ID, Content: "733: 选中于 6:02，类型未知"},
	}}
	for client, got := range allClients(t, h, loop) {
		if len(got.Choices) != 1 || got.Choices[0].Content != storyFixedProse+"\n" || got.Choices[0].Finish != "stop" {
			t.Errorf("%s saw %+v, want the corrected analysis without its claims block", client, got.Choices)
		}
		if r := got.Header.Get("X-Factgate-Revisions"); r != "1" && !strings.Contains(client, "stream=true") {
			t.Errorf("%s: X-Factgate-Revisions %q, want 1", client, r)
		}
	}
	recs, err := h.mock.WaitFor(2, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	revision := gjson.GetBytes(recs[1].Body, "messages").Array()
	roles := make([]string, len(revision))
	for i, m := range revision {
		roles[i] = m.Get("role").Str
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,assistant,user" || revision[4].Get("content").Str != storyDraftAnswer {
		t.Errorf("the revision request is not the whole conversation plus the draft and the issues: roles %v", roles)
	}
}

// cleanAnswer is an analysis whose one claim the log supports.
var cleanAnswer = claimsAnswer("PlayerA 在 1:24 打包主基地。", claimBase)

func TestHeldRouteValidatesAndRevisesEveryChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		choices   []string
		want      []string
		revisions string
		calls     int
	}{
		{"choice 1 contradicts the facts", []string{cleanAnswer, storyDraftAnswer},
			[]string{"PlayerA 在 1:24 打包主基地。\n", storyFixedProse + "\n"}, "1", 2},
		{"both contradict: one revision each", []string{storyDraftAnswer, storyDraftAnswer},
			[]string{storyFixedProse + "\n", storyFixedProse + "\n"}, "2", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script := `
rules:
  - name: revision
    match: {has_assistant: true}
    answer: {content: ` + yamlString(storyFixedAnswer) + `}
default:
  choices:
    - {content: ` + yamlString(tc.choices[0]) + `}
    - {content: ` + yamlString(tc.choices[1]) + `}
  chunk_size: 7
`
			h := newHarness(t, script, heldRouteConfig("", ""))
			c := chatCase{Model: "ra3-analyst", N: 2, Turns: []chatTurn{{Role: "system", Content: "你是红警 3 录像分析助手。"}, {Role: "user", Content: analysisUser()}}}
			for client, got := range allClients(t, h, c) {
				var contents []string
				for _, ch := range got.Choices {
					contents = append(contents, ch.Content)
					if ch.Finish != "stop" {
						t.Errorf("%s: finish_reason %q", client, ch.Finish)
					}
				}
				if !reflect.DeepEqual(contents, tc.want) {
					t.Errorf("%s saw %q\nwant %q", client, contents, tc.want)
				}
				if strings.Contains(client, "stream=true") {
					if len(got.Order) < 4 || got.Order[0] != 0 || got.Order[1] != 1 || got.Order[2] != 0 || got.Order[3] != 1 {
						t.Errorf("%s: the choices are not interleaved as OpenAI streams them: %v", client, got.Order)
					}
					continue
				}
				issues := got.Header.Get("X-Factgate-Issues")
				if r := got.Header.Get("X-Factgate-Revisions"); r != tc.revisions || !strings.HasSuffix(issues, ";final=0;delivered=0") {
					t.Errorf("%s: X-Factgate-Revisions %q (want %s), X-Factgate-Issues %q (want final=0;delivered=0)", client, r, tc.revisions, issues)
				}
			}
			recs, err := h.mock.WaitFor(tc.calls, 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs[1:] {
				if n := gjson.GetBytes(r.Body, "n"); n.Exists() && n.Int() != 1 {
					t.Errorf("a revision request asks for %s choices, want one per revised choice", n.Raw)
				}
			}
			// The counts cover both choices: each draft's issues are in the header.
			got := viaGo(t, h, c, false)
			tr := h.trace(t, got.Header.Get("X-Factgate-Trace-Id"))
			perChoice := map[int64][]string{}
			for _, a := range tr.Get("attempts").Array() {
				perChoice[a.Get("choice").Int()] = append(perChoice[a.Get("choice").Int()], a.Get("kind").Str)
			}
			if len(perChoice[1]) != 2 || perChoice[1][0] != "draft" || perChoice[1][1] != "revision" || len(perChoice[0]) == 0 || perChoice[0][0] != "draft" {
				t.Errorf("the trace does not keep each choice's attempts: %v\n%s", perChoice, tr.Raw)
			}
			if n := len(tr.Get("choices").Array()); n != 2 {
				t.Errorf("the trace has %d choice outcomes, want 2: %s", n, tr.Raw)
			}
		})
	}
}
