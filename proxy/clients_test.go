package proxy

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/factgate/factgate/interceptors"
)

const clientScript = `
rules:
  - match: {model: rate-limited}
    answer:
      fault:
        status: 429
        body: '{"error":{"message":"slow down","type":"rate_limit","param":null,"code":"rate_limit_exceeded"}}'
  - match: {model: broken}
    answer:
      fault:
        status: 500
        body: '{"error":{"message":"upstream exploded","type":"server_error","param":null,"code":"boom"}}'
default:
  content: "PlayerA 在 1:24 打包主基地，1:41 展开。An answer with \"quotes\", a\nnewline and émojis 🚀."
  reasoning: "thinking about the replay"
  usage: {prompt_tokens: 120, completion_tokens: 30}
`

const wantClientContent = "PlayerA 在 1:24 打包主基地，1:41 展开。An answer with \"quotes\", a\nnewline and émojis 🚀."

// holdChain is a response phase that changes nothing: it makes a route buffer
// answers and synthesize streams, as every validating route does.
type holdChain struct{}

func (holdChain) Name() string { return "hold" }
func (holdChain) OnResponse(context.Context, *interceptors.Exchange) error {
	return nil
}

// clientRoutes: "alias" passes through; "held" goes through a response phase.
const clientConfig = `
server: {keepalive_interval: 100ms}
upstreams:
  mock: {base_url: "%MOCK%"}
routes:
  - {name: plain, models: [alias], upstream: mock}
  - {name: held, models: [held], upstream: mock}
  - {name: default, default: true, upstream: mock}
`

func TestGoOpenAIClientThroughTheProxy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, clientScript, clientConfig, WithChain("held", holdChain{}))
	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	c := goopenai.NewClientWithConfig(cfg)
	ctx := context.Background()
	for _, model := range []string{"alias", "held"} {
		t.Run(model, func(t *testing.T) {
			req := goopenai.ChatCompletionRequest{Model: model, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "analyse"}}}
			resp, err := c.CreateChatCompletion(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Message.Content != wantClientContent || resp.Choices[0].Message.ReasoningContent != "thinking about the replay" {
				t.Fatalf("content %q reasoning %q", resp.Choices[0].Message.Content, resp.Choices[0].Message.ReasoningContent)
			}
			if resp.Usage.PromptTokens != 120 || resp.Usage.CompletionTokens != 30 || resp.Usage.TotalTokens != 150 {
				t.Fatalf("usage %+v", resp.Usage)
			}

			req.Stream = true
			req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
			stream, err := c.CreateChatCompletionStream(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			var content, reasoning strings.Builder
			var usage *goopenai.Usage
			for {
				chunk, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if chunk.Usage != nil {
					usage = chunk.Usage
				}
				if len(chunk.Choices) > 0 {
					content.WriteString(chunk.Choices[0].Delta.Content)
					reasoning.WriteString(chunk.Choices[0].Delta.ReasoningContent)
				}
			}
			if content.String() != resp.Choices[0].Message.Content {
				t.Fatalf("streamed content %q differs from non-streamed %q", content.String(), resp.Choices[0].Message.Content)
			}
			if reasoning.String() != "thinking about the replay" {
				t.Fatalf("streamed reasoning %q", reasoning.String())
			}
			if usage == nil || usage.TotalTokens != 150 {
				t.Fatalf("stream usage %+v", usage)
			}
		})
	}
	for _, tc := range []struct {
		model, code string
		status      int
	}{{"rate-limited", "rate_limit_exceeded", 429}, {"broken", "boom", 500}} {
		_, err := c.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: tc.model, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
		var apiErr *goopenai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tc.status || apiErr.Code != tc.code {
			t.Fatalf("%s: want APIError %d %s, got %#v", tc.model, tc.status, tc.code, err)
		}
	}
}

func TestOfficialOpenAIClientThroughTheProxy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, clientScript, clientConfig, WithChain("held", holdChain{}))
	c := oa.NewClient(option.WithBaseURL(h.base+"/v1/"), option.WithAPIKey("client-key"), option.WithMaxRetries(0))
	ctx := context.Background()
	for _, model := range []string{"alias", "held"} {
		t.Run(model, func(t *testing.T) {
			params := oa.ChatCompletionNewParams{Model: model, Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("analyse")}}
			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Message.Content != wantClientContent || resp.Usage.TotalTokens != 150 {
				t.Fatalf("content %q usage %+v", resp.Choices[0].Message.Content, resp.Usage)
			}
			params.StreamOptions = oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}
			stream := c.Chat.Completions.NewStreaming(ctx, params)
			acc := oa.ChatCompletionAccumulator{}
			var content strings.Builder
			for stream.Next() {
				chunk := stream.Current()
				acc.AddChunk(chunk)
				if len(chunk.Choices) > 0 {
					content.WriteString(chunk.Choices[0].Delta.Content)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if content.String() != wantClientContent || acc.Choices[0].Message.Content != wantClientContent {
				t.Fatalf("streamed content %q", content.String())
			}
			if acc.Usage.TotalTokens != 150 {
				t.Fatalf("stream usage %+v", acc.Usage)
			}
		})
	}
	_, err := c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "rate-limited", Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("x")}})
	var apiErr *oa.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("want a 429 openai.Error, got %#v", err)
	}
}

// TestClientsSeeUpstreamErrorsOnStreamsAndHeldRoutes: both clients get their
// error type, with the upstream's status and code, for a streaming request and on
// a route that holds answers.
func TestClientsSeeUpstreamErrorsOnStreamsAndHeldRoutes(t *testing.T) {
	t.Parallel()
	const script = `
rules:
  - match: {last_user: "limit"}
    answer:
      fault:
        status: 429
        body: '{"error":{"message":"slow down","type":"rate_limit","param":null,"code":"rate_limit_exceeded"}}'
  - match: {last_user: "boom"}
    answer:
      fault:
        status: 500
        body: '{"error":{"message":"upstream exploded","type":"server_error","param":null,"code":"boom"}}'
`
	// A held stream whose chain takes longer than keepalive_interval commits its
	// 200 and event stream before the upstream's error is known (an error event,
	// not a status): the interval is far above the chain's time, so that a loaded
	// machine (-race, 2 cores: 100ms was too short) cannot commit it.
	config := strings.Replace(clientConfig, "keepalive_interval: 100ms", "keepalive_interval: 60s", 1)
	h := newHarness(t, script, config, WithChain("held", holdChain{}))
	ctx := context.Background()
	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	goc := goopenai.NewClientWithConfig(cfg)
	oac := oa.NewClient(option.WithBaseURL(h.base+"/v1/"), option.WithAPIKey("client-key"), option.WithMaxRetries(0))
	for _, model := range []string{"alias", "held"} {
		for _, tc := range []struct {
			say, code string
			status    int
		}{{"limit", "rate_limit_exceeded", 429}, {"boom", "boom", 500}} {
			name := model + "/" + tc.say
			// go-openai, streaming
			_, err := goc.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: model, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: tc.say}}})
			var apiErr *goopenai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tc.status || apiErr.Code != tc.code {
				t.Errorf("%s: go-openai stream: want APIError %d %s, got %#v", name, tc.status, tc.code, err)
			}
			// openai-go, non-streaming and streaming
			_, err = oac.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: model, Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage(tc.say)}})
			var oaErr *oa.Error
			if !errors.As(err, &oaErr) || oaErr.StatusCode != tc.status || oaErr.Code != tc.code {
				t.Errorf("%s: openai-go: want Error %d %s, got %#v", name, tc.status, tc.code, err)
			}
			stream := oac.Chat.Completions.NewStreaming(ctx, oa.ChatCompletionNewParams{Model: model, Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage(tc.say)}})
			for stream.Next() {
			}
			oaErr = nil
			if err := stream.Err(); !errors.As(err, &oaErr) || oaErr.StatusCode != tc.status {
				t.Errorf("%s: openai-go stream: want Error %d, got %#v", name, tc.status, err)
			}
		}
	}
}
