package mockupstream

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

	openaigo "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"
)

// clientScript gives both real clients something to parse: reasoning, Chinese
// content chunked by runes, overridden and computed usage, and two faults.
const clientScript = `
rules:
  - name: reasoned
    match: {last_user: "^analyse"}
    answer:
      reasoning: "先看 1:24 的打包，再看 1:41 的展开。"
      content: "587 可能是盟军基地车，也可能是矿车指挥部。"
      chunk_size: 5
  - name: fixed-usage
    match: {last_user: "^count"}
    answer:
      content: counted
      usage: {prompt_tokens: 1000, completion_tokens: 20}
  - name: rate-limited
    match: {last_user: "^fault:429"}
    answer:
      fault:
        status: 429
        headers: {Retry-After: "7"}
        body: '{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}'
  - name: broken
    match: {last_user: "^fault:500"}
    answer:
      fault:
        status: 500
        body: '{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}'
`

func newGoOpenAI(s *Server) *goopenai.Client {
	cfg := goopenai.DefaultConfig("test-key")
	cfg.BaseURL = s.URL()
	return goopenai.NewClientWithConfig(cfg)
}

func newOpenAIGo(s *Server) openaigo.Client {
	return openaigo.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
}

// clientCase is one scripted answer the clients must see exactly.
type clientCase struct {
	name         string
	user         string
	content      string
	reasoning    string
	fixedPrompt  int // 0: computed from the request body the mock received
	fixedAnswer  int // 0: computed from content and reasoning
	includeUsage bool
}

var clientCases = []clientCase{
	{name: "reasoning and Chinese content", user: "analyse replay", content: "587 可能是盟军基地车，也可能是矿车指挥部。", reasoning: "先看 1:24 的打包，再看 1:41 的展开。", includeUsage: true},
	{name: "usage fixed by the script", user: "count tokens", content: "counted", fixedPrompt: 1000, fixedAnswer: 20, includeUsage: true},
	{name: "built-in echo without usage chunk", user: "你好", content: "mock answer: 你好"},
}

// wantUsage is the usage the mock must report for c, given the body it recorded.
func wantUsage(t *testing.T, s *Server, c clientCase) (prompt, completion int) {
	t.Helper()
	recs, err := s.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	prompt, completion = c.fixedPrompt, c.fixedAnswer
	if prompt == 0 {
		if prompt, err = PromptTokens(recs[0].Body); err != nil {
			t.Fatal(err)
		}
	}
	if completion == 0 {
		completion = CompletionTokens(c.content, c.reasoning)
	}
	return prompt, completion
}

func TestGoOpenAIClientReadsAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range clientCases {
		for _, stream := range []bool{false, true} {
			name := c.name + map[bool]string{false: " non-stream", true: " stream"}[stream]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := startMock(t, mustParse(t, clientScript), Options{ChunkSize: 4})
				client := newGoOpenAI(s)
				req := goopenai.ChatCompletionRequest{
					Model:    "deepseek-chat",
					Messages: []goopenai.ChatCompletionMessage{{Role: "system", Content: "你是分析师。"}, {Role: "user", Content: c.user}},
				}
				ctx := context.Background()
				var content, reasoning, model string
				var usage *goopenai.Usage
				if !stream {
					resp, err := client.CreateChatCompletion(ctx, req)
					if err != nil {
						t.Fatalf("CreateChatCompletion: %v", err)
					}
					content, reasoning, model = resp.Choices[0].Message.Content, resp.Choices[0].Message.ReasoningContent, resp.Model
					if resp.Choices[0].FinishReason != goopenai.FinishReasonStop {
						t.Errorf("finish_reason = %q, want stop", resp.Choices[0].FinishReason)
					}
					usage = &resp.Usage
				} else {
					req.Stream = true
					if c.includeUsage {
						req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
					}
					st, err := client.CreateChatCompletionStream(ctx, req)
					if err != nil {
						t.Fatalf("CreateChatCompletionStream: %v", err)
					}
					defer st.Close()
					var finish goopenai.FinishReason
					for {
						chunk, err := st.Recv()
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							t.Fatalf("Recv: %v", err)
						}
						model = chunk.Model
						if chunk.Usage != nil {
							usage = chunk.Usage
						}
						for _, ch := range chunk.Choices {
							content += ch.Delta.Content
							reasoning += ch.Delta.ReasoningContent
							if ch.FinishReason != "" {
								finish = ch.FinishReason
							}
						}
					}
					if finish != goopenai.FinishReasonStop {
						t.Errorf("finish_reason = %q, want stop", finish)
					}
				}
				if content != c.content || reasoning != c.reasoning {
					t.Errorf("client saw content %q reasoning %q, want %q and %q", content, reasoning, c.content, c.reasoning)
				}
				if model != "deepseek-chat" {
					t.Errorf("model = %q, want the request's deepseek-chat", model)
				}
				if stream && !c.includeUsage {
					if usage != nil {
						t.Errorf("usage %+v sent without stream_options.include_usage", usage)
					}
					return
				}
				prompt, completion := wantUsage(t, s, c)
				if usage == nil || usage.PromptTokens != prompt || usage.CompletionTokens != completion || usage.TotalTokens != prompt+completion {
					t.Errorf("usage = %+v, want prompt %d completion %d", usage, prompt, completion)
				}
			})
		}
	}
}

func TestOpenAIGoClientReadsAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range clientCases {
		for _, stream := range []bool{false, true} {
			name := c.name + map[bool]string{false: " non-stream", true: " stream"}[stream]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := startMock(t, mustParse(t, clientScript), Options{ChunkSize: 4})
				client := newOpenAIGo(s)
				params := openaigo.ChatCompletionNewParams{
					Model:    "deepseek-chat",
					Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.SystemMessage("你是分析师。"), openaigo.UserMessage(c.user)},
				}
				ctx := context.Background()
				var content, reasoning, model string
				var usage *openaigo.CompletionUsage
				if !stream {
					resp, err := client.Chat.Completions.New(ctx, params)
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					msg := resp.Choices[0].Message
					content, model = msg.Content, resp.Model
					reasoning = rawString(t, msg.JSON.ExtraFields["reasoning_content"].Raw())
					if resp.Choices[0].FinishReason != "stop" {
						t.Errorf("finish_reason = %q, want stop", resp.Choices[0].FinishReason)
					}
					usage = &resp.Usage
				} else {
					if c.includeUsage {
						params.StreamOptions = openaigo.ChatCompletionStreamOptionsParam{IncludeUsage: openaigo.Bool(true)}
					}
					st := client.Chat.Completions.NewStreaming(ctx, params)
					defer st.Close()
					for st.Next() {
						chunk := st.Current()
						model = chunk.Model
						if chunk.JSON.Usage.Valid() && chunk.Usage.TotalTokens > 0 {
							u := chunk.Usage
							usage = &u
						}
						for _, ch := range chunk.Choices {
							content += ch.Delta.Content
							reasoning += rawString(t, ch.Delta.JSON.ExtraFields["reasoning_content"].Raw())
						}
					}
					if err := st.Err(); err != nil {
						t.Fatalf("stream: %v", err)
					}
				}
				if content != c.content || reasoning != c.reasoning {
					t.Errorf("client saw content %q reasoning %q, want %q and %q", content, reasoning, c.content, c.reasoning)
				}
				if model != "deepseek-chat" {
					t.Errorf("model = %q, want the request's deepseek-chat", model)
				}
				if stream && !c.includeUsage {
					if usage != nil {
						t.Errorf("usage %+v sent without stream_options.include_usage", usage)
					}
					return
				}
				prompt, completion := wantUsage(t, s, c)
				if usage == nil || usage.PromptTokens != int64(prompt) || usage.CompletionTokens != int64(completion) || usage.TotalTokens != int64(prompt+completion) {
					t.Errorf("usage = %+v, want prompt %d completion %d", usage, prompt, completion)
				}
			})
		}
	}
}

// rawString decodes a raw JSON string field ("" when absent).
func rawString(t *testing.T, raw string) string {
	t.Helper()
	if raw == "" || raw == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("reasoning_content %s is not a JSON string: %v", raw, err)
	}
	return s
}

func TestClientsSeeFaultsAsAPIErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		user       string
		status     int
		message    string
		retryAfter string
	}{
		{name: "429 with Retry-After", user: "fault:429", status: http.StatusTooManyRequests, message: "Rate limit reached", retryAfter: "7"},
		{name: "500 with an envelope", user: "fault:500", status: http.StatusInternalServerError, message: "The server had an error"},
	}
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			name := c.name + map[bool]string{false: " non-stream", true: " stream"}[stream]
			t.Run("go-openai "+name, func(t *testing.T) {
				t.Parallel()
				s := startMock(t, mustParse(t, clientScript), Options{})
				client := newGoOpenAI(s)
				req := goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: c.user}}}
				var err error
				if stream {
					req.Stream = true
					var st *goopenai.ChatCompletionStream
					st, err = client.CreateChatCompletionStream(context.Background(), req)
					if st != nil {
						st.Close()
					}
				} else {
					_, err = client.CreateChatCompletion(context.Background(), req)
				}
				var apiErr *goopenai.APIError
				if !errors.As(err, &apiErr) {
					t.Fatalf("error %v (%T) is not an *openai.APIError", err, err)
				}
				if apiErr.HTTPStatusCode != c.status || apiErr.Message != c.message {
					t.Errorf("APIError status %d message %q, want %d %q", apiErr.HTTPStatusCode, apiErr.Message, c.status, c.message)
				}
			})
			t.Run("openai-go "+name, func(t *testing.T) {
				t.Parallel()
				s := startMock(t, mustParse(t, clientScript), Options{})
				client := newOpenAIGo(s)
				params := openaigo.ChatCompletionNewParams{Model: "m", Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage(c.user)}}
				var err error
				if stream {
					st := client.Chat.Completions.NewStreaming(context.Background(), params)
					for st.Next() {
					}
					err = st.Err()
					st.Close()
				} else {
					_, err = client.Chat.Completions.New(context.Background(), params)
				}
				var apiErr *openaigo.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("error %v (%T) is not an *openai.Error", err, err)
				}
				if apiErr.StatusCode != c.status || apiErr.Message != c.message {
					t.Errorf("Error status %d message %q, want %d %q", apiErr.StatusCode, apiErr.Message, c.status, c.message)
				}
				if got := apiErr.Response.Header.Get("Retry-After"); got != c.retryAfter {
					t.Errorf("Retry-After = %q, want %q", got, c.retryAfter)
				}
				if recs, _ := s.WaitFor(1, 5*time.Second); len(recs) != 1 {
					t.Errorf("the mock served %d requests, want 1 (the client must not retry here)", len(recs))
				}
			})
		}
	}
}

func TestClientsListModels(t *testing.T) {
	t.Parallel()
	s := startMock(t, nil, Options{Models: []string{"deepseek-chat", "deepseek-reasoner"}})
	list, err := newGoOpenAI(s).ListModels(context.Background())
	if err != nil {
		t.Fatalf("go-openai ListModels: %v", err)
	}
	var ids []string
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "deepseek-chat,deepseek-reasoner" {
		t.Errorf("go-openai sees models %v", ids)
	}
	oc := newOpenAIGo(s)
	m, err := oc.Models.Get(context.Background(), "deepseek-reasoner")
	if err != nil || m.ID != "deepseek-reasoner" {
		t.Errorf("openai-go Models.Get = %+v, %v", m, err)
	}
}

// toolScript answers with tool calls, with several choices, or both.
const toolScript = `
rules:
  - name: weather
    match: {last_user: "^weather"}
    answer:
      tool_calls:
        - id: call_w1
          function: {name: get_weather, arguments: '{"city":"巴黎","unit":"celsius"}'}
        - function: {name: get_time, arguments: '{"tz":"Europe/Paris"}'}
      chunk_size: 5
  - name: two
    match: {last_user: "^two"}
    answer:
      choices:
        - {content: "第一个答案，比较长一些。", reasoning: 先想一想。}
        - {content: second answer}
        - tool_calls: [{id: call_c2, function: {name: lookup, arguments: '{"q":"x"}'}}]
      chunk_size: 3
`

// choiceSeen is what a client assembled of one choice.
type choiceSeen struct {
	content, reasoning, finish string
	contentNull                bool
	calls                      []callSeen
}

type callSeen struct{ id, typ, name, args string }

func TestClientsReadToolCallsAndSeveralChoices(t *testing.T) {
	t.Parallel()
	weather := []choiceSeen{{contentNull: true, finish: "tool_calls", calls: []callSeen{
		{"call_w1", "function", "get_weather", `{"city":"巴黎","unit":"celsius"}`},
		{"call_mock_0_1", "function", "get_time", `{"tz":"Europe/Paris"}`},
	}}}
	two := []choiceSeen{
		{content: "第一个答案，比较长一些。", reasoning: "先想一想。", finish: "stop"},
		{content: "second answer", finish: "stop"},
		{contentNull: true, finish: "tool_calls", calls: []callSeen{{"call_c2", "function", "lookup", `{"q":"x"}`}}},
		{contentNull: true, finish: "tool_calls", calls: []callSeen{{"call_c2", "function", "lookup", `{"q":"x"}`}}},
	}
	for _, tc := range []struct {
		name, user string
		n          int
		want       []choiceSeen
	}{
		{"tool calls", "weather?", 0, weather},
		{"four choices, the last scripted one repeats", "two answers", 4, two},
		{"one choice of several scripted", "two answers", 1, two[:1]},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tc.name, stream), func(t *testing.T) {
				t.Parallel()
				s := startMock(t, mustParse(t, toolScript), Options{})
				req := goopenai.ChatCompletionRequest{Model: "m", N: tc.n, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: tc.user}}}
				got := goOpenAIChoices(t, newGoOpenAI(s), req, stream)
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("go-openai saw\n%+v\nwant\n%+v", got, tc.want)
				}
				got = openAIGoChoices(t, newOpenAIGo(s), tc.user, tc.n, stream)
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("openai-go saw\n%+v\nwant\n%+v", got, tc.want)
				}
			})
		}
	}
}

// goOpenAIChoices sends req with go-openai and assembles every choice.
func goOpenAIChoices(t *testing.T, c *goopenai.Client, req goopenai.ChatCompletionRequest, stream bool) []choiceSeen {
	t.Helper()
	ctx := context.Background()
	if !stream {
		resp, err := c.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var out []choiceSeen
		for i, ch := range resp.Choices {
			if ch.Index != i {
				t.Fatalf("choice %d has index %d", i, ch.Index)
			}
			cs := choiceSeen{content: ch.Message.Content, reasoning: ch.Message.ReasoningContent, finish: string(ch.FinishReason)}
			for _, call := range ch.Message.ToolCalls {
				cs.calls = append(cs.calls, callSeen{call.ID, string(call.Type), call.Function.Name, call.Function.Arguments})
			}
			out = append(out, cs)
		}
		return markNull(out)
	}
	req.Stream = true
	st, err := c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []choiceSeen
	order := []int{}
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunk.Choices {
			for len(out) <= ch.Index {
				out = append(out, choiceSeen{})
			}
			order = append(order, ch.Index)
			cs := &out[ch.Index]
			cs.content += ch.Delta.Content
			cs.reasoning += ch.Delta.ReasoningContent
			if ch.FinishReason != "" {
				cs.finish = string(ch.FinishReason)
			}
			for _, d := range ch.Delta.ToolCalls {
				if d.Index == nil {
					t.Fatalf("a tool call delta without index: %+v", d)
				}
				for len(cs.calls) <= *d.Index {
					cs.calls = append(cs.calls, callSeen{})
				}
				call := &cs.calls[*d.Index]
				call.id += d.ID
				call.typ += string(d.Type)
				call.name += d.Function.Name
				call.args += d.Function.Arguments
			}
		}
	}
	if len(out) > 1 && (len(order) < 2 || order[0] != 0 || order[1] != 1) {
		t.Errorf("choices are not interleaved as OpenAI streams them: event order %v", order)
	}
	return markNull(out)
}

// markNull records, for the comparison, that a choice with tool calls and no
// content had its content null (go-openai reads null as "").
func markNull(cs []choiceSeen) []choiceSeen {
	for i := range cs {
		if len(cs[i].calls) > 0 && cs[i].content == "" {
			cs[i].contentNull = true
		}
	}
	return cs
}

// openAIGoChoices sends the request with openai-go; streams are assembled by its
// ChatCompletionAccumulator.
func openAIGoChoices(t *testing.T, c openaigo.Client, user string, n int, stream bool) []choiceSeen {
	t.Helper()
	ctx := context.Background()
	params := openaigo.ChatCompletionNewParams{Model: "m", Messages: []openaigo.ChatCompletionMessageParamUnion{openaigo.UserMessage(user)}}
	if n > 0 {
		params.N = openaigo.Int(int64(n))
	}
	var cc *openaigo.ChatCompletion
	var reasoning []string
	if !stream {
		resp, err := c.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		cc = resp
	} else {
		st := c.Chat.Completions.NewStreaming(ctx, params)
		acc := openaigo.ChatCompletionAccumulator{}
		for st.Next() {
			chunk := st.Current()
			acc.AddChunk(chunk)
			// The accumulator keeps no provider extension: collect reasoning_content.
			for _, ch := range chunk.Choices {
				for len(reasoning) <= int(ch.Index) {
					reasoning = append(reasoning, "")
				}
				reasoning[ch.Index] += rawString(t, ch.Delta.JSON.ExtraFields["reasoning_content"].Raw())
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		cc = &acc.ChatCompletion
	}
	var out []choiceSeen
	for _, ch := range cc.Choices {
		cs := choiceSeen{content: ch.Message.Content, finish: ch.FinishReason}
		cs.reasoning = rawString(t, ch.Message.JSON.ExtraFields["reasoning_content"].Raw())
		if int(ch.Index) < len(reasoning) {
			cs.reasoning = reasoning[ch.Index]
		}
		if !stream {
			cs.contentNull = ch.Message.JSON.Content.Raw() == "null"
		}
		for _, call := range ch.Message.ToolCalls {
			cs.calls = append(cs.calls, callSeen{call.ID, string(call.Type), call.Function.Name, call.Function.Arguments})
		}
		out = append(out, cs)
	}
	if stream {
		out = markNull(out)
	}
	return out
}
