package mockupstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
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
