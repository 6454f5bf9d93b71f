package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
)

// Issue 27, item 1: whatever JSON factgate writes into a "data:" line is one
// line, whatever the upstream's JSON looks like — indented and ending with a
// newline, as OpenAI's API and Go's json.Encoder write it — on every route kind,
// both upstream dialects, stream and not.

// strictEvent is one event of a stream read by readStrictSSE.
type strictEvent struct{ Name, Data string }

// readStrictSSE reads an event stream as the strictest client does (go-openai
// reads a line at a time): every "data:" line must carry a complete JSON value
// (or [DONE]) by itself, an event has at most one data line, comments and blank
// lines are all else there may be, and the stream ends between events. It
// returns the events and the comment lines.
func readStrictSSE(raw string) (events []strictEvent, comments []string, err error) {
	var ev strictEvent
	open, hasData := false, false
	lines := strings.Split(raw, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, line := range lines {
		where := fmt.Sprintf("line %d %q", i+1, line)
		switch {
		case line == "":
			if hasData {
				events = append(events, ev)
			}
			ev, open, hasData = strictEvent{}, false, false
		case strings.HasPrefix(line, ":"):
			comments = append(comments, line)
		case strings.HasPrefix(line, "event:"):
			ev.Name, open = strings.TrimSpace(strings.TrimPrefix(line, "event:")), true
		case strings.HasPrefix(line, "data:"):
			data := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			if hasData {
				return events, comments, fmt.Errorf("%s: a second data line in one event (its JSON was split over lines)", where)
			}
			if data != "[DONE]" && !json.Valid([]byte(data)) {
				return events, comments, fmt.Errorf("%s: the data line is not complete JSON", where)
			}
			ev.Data, open, hasData = data, true, true
		default:
			return events, comments, fmt.Errorf("%s: not an SSE field a client knows", where)
		}
	}
	if open {
		return events, comments, fmt.Errorf("the stream ends inside an event")
	}
	return events, comments, nil
}

func TestReadStrictSSERefusesSplitJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, raw string
		ok        bool
	}{
		{"one event a line", "data: {\"a\":1}\n\ndata: [DONE]\n\n", true},
		{"comments and blank keep-alives", "\n: keep-alive\n\nevent: x\ndata: {}\n\n", true},
		{"a newline before the closing brace", "data: {\"a\":1\ndata: }\n\n", false},
		{"an indented object", "data: {\n\n", false},
		{"cut off", "data: {}\n", false},
		{"a line that is no field", "{\"a\":1}\n\n", false},
	} {
		_, _, err := readStrictSSE(tc.raw)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.desc, err, tc.ok)
		}
	}
}

// framingScript answers the replay with an accepted analysis and anything else
// with a greeting, the usage fixed.
var framingScript = `
rules:
  - match: {last_user: "PlayerA"}
    answer:
      content: ` + yamlString(storyFixedAnswer) + `
      usage: {prompt_tokens: 9000, completion_tokens: 400}
default:
  content: "Hello there!"
  usage: {prompt_tokens: 24, completion_tokens: 4}
`

// framingCases are the requests of the framing tests: one the pack is about (held
// and checked) and one it is not.
var framingCases = []struct {
	name, user, want string
	tokens           int64
}{
	{"an analysis", analysisUser(), storyFixedAnswer, 9400},
	{"a greeting", "Say hello", "Hello there!", 28},
}

func TestIndentedUpstreamJSONReachesChatClientsOneEventALine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, framingScript, responsesConfig)
	h.mock.SetIndent(true)
	oac := responsesClient(h, nil)
	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	goc := goopenai.NewClientWithConfig(cfg)
	// Chat completions go upstream as chat completions on either dialect.
	// Every route kind: with interceptors (held, or relayed live) and without.
	var models []string
	for _, d := range dialects {
		models = append(models, d.held, d.plain)
	}
	for _, model := range models {
		for _, tc := range framingCases {
			t.Run(model+"/"+tc.name, func(t *testing.T) {
				body := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":%s}]}`, model, yamlString(tc.user))
				status, _, raw := h.post(t, "/v1/chat/completions", body)
				if status != 200 {
					t.Fatalf("%d %s", status, raw)
				}
				events, _, err := readStrictSSE(string(raw))
				if err != nil {
					t.Fatalf("%v\n%s", err, raw)
				}
				var content strings.Builder
				var usage int64
				for _, ev := range events {
					content.WriteString(gjson.Get(ev.Data, "choices.0.delta.content").Str)
					if u := gjson.Get(ev.Data, "usage.total_tokens"); u.Exists() {
						usage = u.Int()
					}
				}
				if content.String() != tc.want || usage != tc.tokens {
					t.Errorf("content %q usage %d, want %q and %d", content.String(), usage, tc.want, tc.tokens)
				}

				params := oa.ChatCompletionNewParams{Model: model, Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage(tc.user)},
					StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}}
				stream := oac.Chat.Completions.NewStreaming(context.Background(), params)
				acc := oa.ChatCompletionAccumulator{}
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				if err := stream.Err(); err != nil {
					t.Fatalf("openai-go: %v", err)
				}
				if acc.Choices[0].Message.Content != tc.want || acc.Usage.TotalTokens != tc.tokens {
					t.Errorf("openai-go: content %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
				}
				resp, err := oac.Chat.Completions.New(context.Background(), params)
				if err != nil || resp.Choices[0].Message.Content != tc.want || resp.Usage.TotalTokens != tc.tokens {
					t.Fatalf("openai-go, not streamed: %v %+v", err, resp)
				}

				// go-openai reads a stream a line at a time.
				req := goopenai.ChatCompletionRequest{Model: model, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: tc.user}},
					StreamOptions: &goopenai.StreamOptions{IncludeUsage: true}}
				gs, err := goc.CreateChatCompletionStream(context.Background(), req)
				if err != nil {
					t.Fatalf("go-openai: %v", err)
				}
				var got strings.Builder
				var gotUsage int
				for {
					chunk, err := gs.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("go-openai: %v", err)
					}
					if len(chunk.Choices) > 0 {
						got.WriteString(chunk.Choices[0].Delta.Content)
					}
					if chunk.Usage != nil {
						gotUsage = chunk.Usage.TotalTokens
					}
				}
				gs.Close()
				if got.String() != tc.want || int64(gotUsage) != tc.tokens {
					t.Errorf("go-openai: content %q usage %d", got.String(), gotUsage)
				}
				if r, err := goc.CreateChatCompletion(context.Background(), req); err != nil || r.Choices[0].Message.Content != tc.want {
					t.Errorf("go-openai, not streamed: %v %+v", err, r)
				}
			})
		}
	}
}

func TestIndentedUpstreamJSONReachesResponsesClientsOneEventALine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, framingScript, responsesConfig)
	h.mock.SetIndent(true)
	c := responsesClient(h, nil)
	for _, d := range dialects {
		for _, model := range []string{d.held, d.plain} {
			for _, tc := range framingCases {
				t.Run(model+"/"+tc.name, func(t *testing.T) {
					params := responses.ResponseNewParams{
						Model:        model,
						Instructions: oa.String(storyInstructions),
						Input:        responses.ResponseNewParamsInputUnion{OfString: oa.String(tc.user)},
					}
					body, _ := params.MarshalJSON()
					status, _, raw := h.post(t, "/v1/responses", strings.Replace(string(body), "{", `{"stream":true,`, 1))
					if status != 200 {
						t.Fatalf("%d %s", status, raw)
					}
					events, _, err := readStrictSSE(string(raw))
					if err != nil {
						t.Fatalf("%v\n%s", err, raw)
					}
					if len(events) < 3 || events[0].Name != "response.created" || events[len(events)-1].Name != "response.completed" {
						t.Fatalf("events %v", events)
					}
					final := gjson.Get(events[len(events)-1].Data, "response")
					if got := final.Get("output.#(type==\"message\").content.0.text").Str; got != tc.want {
						t.Errorf("response.completed carries %q, want %q", got, tc.want)
					}
					if u := final.Get("usage.total_tokens").Int(); u != tc.tokens {
						t.Errorf("usage %d, want %d", u, tc.tokens)
					}

					got := streamResponses(t, c, params)
					if got.streamErr != nil || got.text != tc.want || got.final == nil || got.final.Usage.TotalTokens != tc.tokens {
						t.Errorf("openai-go: err %v text %q final %v", got.streamErr, got.text, got.final)
					}
					r, err := c.Responses.New(context.Background(), params)
					if err != nil || r.OutputText() != tc.want {
						t.Fatalf("openai-go, not streamed: %v %v", err, r)
					}
				})
			}
		}
	}
}

// TestIndentedUpstreamStreamsAreReadAsEvents: an upstream that spreads each
// streamed event's JSON over several data lines (valid SSE: a client joins them)
// is read event by event where factgate reads a stream — the draft's live
// reasoning (stream_reasoning) — and reaches the client one event a line.
func TestIndentedUpstreamStreamsAreReadAsEvents(t *testing.T) {
	t.Parallel()
	script := `
default:
  content: ` + yamlString(storyFixedAnswer) + `
  reasoning: "先看 1:24 的打包。"
  chunk_size: 16
`
	h := newHarness(t, script, heldRouteConfig("", "    stream_reasoning: true"))
	h.mock.SetIndent(true)
	body := fmt.Sprintf(`{"model":"ra3-analyst","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":%s}]}`, yamlString(analysisUser()))
	status, _, raw := h.post(t, "/v1/chat/completions", body)
	events, _, err := readStrictSSE(string(raw))
	if status != 200 || err != nil {
		t.Fatalf("%d %v:\n%s", status, err, raw)
	}
	var content, reasoning strings.Builder
	for _, ev := range events {
		content.WriteString(gjson.Get(ev.Data, "choices.0.delta.content").Str)
		reasoning.WriteString(gjson.Get(ev.Data, "choices.0.delta.reasoning_content").Str)
	}
	// The claims block factgate asked for is stripped (strip_claims auto).
	if strings.TrimSpace(content.String()) != storyFixedProse || reasoning.String() != "先看 1:24 的打包。" {
		t.Errorf("content %q reasoning %q", content.String(), reasoning.String())
	}
}
