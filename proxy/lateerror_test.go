package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
)

// Issue 27, item 4: an upstream error that arrives after the held stream's
// headers and keep-alives went out reaches every client as the API error it is
// — go-openai's *openai.APIError included, which reads every line that is not
// "data:" into the error it decodes.

// lateErrorScript fails the analysis after 600 ms (four keep-alive intervals of
// responsesConfig, so the held stream is committed first) with an indented error,
// and a request that says "fail now" at once (a 400, which is not retried).
const lateErrorScript = `
rules:
  - match: {last_user: "fail now"}
    answer:
      fault:
        status: 400
        body: "{\n  \"error\": {\n    \"message\": \"bad input\",\n    \"type\": \"invalid_request_error\",\n    \"param\": null,\n    \"code\": \"invalid_value\"\n  }\n}\n"
  - match: {last_user: "PlayerA"}
    answer:
      latency: 600ms
      fault:
        status: 500
        body: "{\n  \"error\": {\n    \"message\": \"upstream exploded\",\n    \"type\": \"server_error\",\n    \"param\": null,\n    \"code\": \"boom\"\n  }\n}\n"
`

func TestLateUpstreamErrorsReachGoOpenAIAsAPIErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, lateErrorScript, responsesConfig)
	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	goc := goopenai.NewClientWithConfig(cfg)
	ctx := context.Background()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			req := goopenai.ChatCompletionRequest{Model: d.held, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: analysisUser()}},
				StreamOptions: &goopenai.StreamOptions{IncludeUsage: true}}
			// The raw stream: keep-alives, then one error event on one line.
			body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":%s}]}`, d.held, yamlString(analysisUser()))
			status, _, raw := h.post(t, "/v1/chat/completions", body)
			events, _, err := readStrictSSE(string(raw))
			if status != 200 || err != nil || len(events) != 2 || gjson.Get(events[0].Data, "error.message").Str != "upstream exploded" || events[1].Data != "[DONE]" {
				t.Fatalf("%d %v, want keep-alives, an error event and [DONE]:\n%s", status, err, raw)
			}
			if !strings.HasPrefix(string(raw), "\n") {
				t.Errorf("the stream does not start with a keep-alive: %q", raw[:min(len(raw), 40)])
			}

			stream, err := goc.CreateChatCompletionStream(ctx, req)
			if err != nil {
				t.Fatalf("go-openai: the stream did not start: %v", err)
			}
			_, err = stream.Recv()
			stream.Close()
			var apiErr *goopenai.APIError
			if !errors.As(err, &apiErr) || apiErr.Message != "upstream exploded" || apiErr.Code != "boom" || apiErr.Type != "server_error" {
				t.Errorf("go-openai: %T %v, want the upstream's *openai.APIError", err, err)
			}
			// Before any byte went out the upstream's status comes as it is.
			fast := req
			fast.Messages = []goopenai.ChatCompletionMessage{{Role: "user", Content: "fail now"}}
			if _, err := goc.CreateChatCompletionStream(ctx, fast); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Message != "bad input" {
				t.Errorf("go-openai, an early error: %v, want the upstream's 400", err)
			}
			if _, err := goc.CreateChatCompletion(ctx, req); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || apiErr.Message != "upstream exploded" {
				t.Errorf("go-openai, not streamed: %v, want the upstream's 500", err)
			}

			oac := responsesClient(h, nil)
			params := oa.ChatCompletionNewParams{Model: d.held, Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage(analysisUser())}}
			s := oac.Chat.Completions.NewStreaming(ctx, params)
			for s.Next() {
			}
			var se *ssestream.StreamError
			if !errors.As(s.Err(), &se) || !strings.Contains(se.Message, "upstream exploded") || gjson.GetBytes(se.Event.Data, "error.code").Str != "boom" {
				t.Errorf("openai-go: %T %v, want the upstream's error raised", s.Err(), s.Err())
			}
			var oaErr *oa.Error
			if _, err := oac.Chat.Completions.New(ctx, params); !errors.As(err, &oaErr) || oaErr.StatusCode != 500 || oaErr.Message != "upstream exploded" {
				t.Errorf("openai-go, not streamed: %v", err)
			}
		})
	}
}

func TestLateUpstreamErrorsOnResponsesStreams(t *testing.T) {
	t.Parallel()
	h := newHarness(t, lateErrorScript, responsesConfig)
	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	goc := goopenai.NewClientWithConfig(cfg)
	oac := responsesClient(h, nil)
	ctx := context.Background()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			// go-openai hands a Responses stream's error event over as the event it
			// is, as it does with the provider's own.
			stream, err := goc.CreateResponseStream(ctx, goopenai.CreateResponseRequest{Model: d.held, Input: analysisUser()})
			if err != nil {
				t.Fatalf("go-openai: %v", err)
			}
			var last goopenai.ResponseStreamEvent
			for {
				ev, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("go-openai: %v", err)
				}
				last = ev
			}
			stream.Close()
			if last.Type != goopenai.ResponseStreamEventError || last.Message != "upstream exploded" || last.Code != "boom" || last.Error == nil {
				t.Errorf("go-openai: the last event %+v, want the upstream's error event", last)
			}
			st := streamResponses(t, oac, responses.ResponseNewParams{Model: d.held, Input: responses.ResponseNewParamsInputUnion{OfString: oa.String(analysisUser())}})
			var se *ssestream.StreamError
			if !errors.As(st.streamErr, &se) || !strings.Contains(se.Message, "upstream exploded") {
				t.Errorf("openai-go: %v, want the upstream's error raised", st.streamErr)
			}
		})
	}
}
