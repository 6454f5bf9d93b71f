package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// TestReviseStreamReasoningLive: on a route with stream_reasoning, a streaming
// client receives the draft's reasoning while the upstream still streams it, then
// only the revised content; the reasoning is not repeated, and the revision call
// does not stream.
func TestReviseStreamReasoningLive(t *testing.T) {
	t.Parallel()
	const reasoning = "先看 6:02 的选择记录，再对照生产时间……733 出现时还没有轰炸机。"
	script := `{"default": {"content": ` + jsonString(storyDraftAnswer) + `, "reasoning": ` + jsonString(reasoning) + `, "chunk_size": 24, "chunk_delay": "10ms", "usage": {"prompt_tokens": 50, "completion_tokens": 25}},
	 "rules": [{"name": "revision", "match": {"has_assistant": true}, "answer": {"content": ` + jsonString(storyFixedAnswer) + `, "usage": {"prompt_tokens": 70, "completion_tokens": 30}}}]}`
	config := strings.Replace(reviseRouteConfig("never", ""), "    pack: ra3\n", "    pack: ra3\n    stream_reasoning: true\n", 1)
	h := newHarness(t, script, config)

	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	var hdr http.Header
	cfg.HTTPClient = &http.Client{Transport: headerTap{next: http.DefaultTransport, last: &hdr}}
	c := goopenai.NewClientWithConfig(cfg)
	req := goopenai.ChatCompletionRequest{Model: "ra3-analyst", Stream: true, StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "分析这局录像。\n\n" + replayText}}}
	s, err := c.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var content, gotReasoning strings.Builder
	upstreamDoneAtFirstReasoning := -1
	usage := 0
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage.TotalTokens
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		d := chunk.Choices[0].Delta
		if d.ReasoningContent != "" && upstreamDoneAtFirstReasoning < 0 {
			upstreamDoneAtFirstReasoning = len(h.mock.Requests())
		}
		gotReasoning.WriteString(d.ReasoningContent)
		content.WriteString(d.Content)
	}
	if upstreamDoneAtFirstReasoning != 0 {
		t.Errorf("the first reasoning arrived after %d upstream calls had finished; want it while the draft still streams", upstreamDoneAtFirstReasoning)
	}
	if gotReasoning.String() != reasoning {
		t.Errorf("reasoning %q, want the draft's %q exactly once", gotReasoning.String(), reasoning)
	}
	if content.String() != storyFixedAnswer {
		t.Errorf("content:\n%s\nwant the revised answer", content.String())
	}
	if usage != 75+100 {
		t.Errorf("usage %d, want both calls summed (175)", usage)
	}
	recs := h.mock.Requests()
	if len(recs) != 2 {
		t.Fatalf("%d upstream calls, want the draft and one revision", len(recs))
	}
	draft, rev := gjson.ParseBytes(recs[0].Body), gjson.ParseBytes(recs[1].Body)
	if !draft.Get("stream").Bool() || !draft.Get("stream_options.include_usage").Bool() {
		t.Errorf("the draft call does not stream with usage: %s %s", draft.Get("stream").Raw, draft.Get("stream_options").Raw)
	}
	if rev.Get("stream").Bool() || rev.Get("stream_options").Exists() {
		t.Errorf("the revision call streams")
	}
	if hdr.Get("X-Factgate-Trace-Id") == "" {
		t.Error("no trace id header on the live stream")
	}

	// The same request without a stream gets the same content, with the reasoning
	// in the message.
	h.mock.Reset()
	plain := viaGoOpenAI(t, h, false)
	if plain.content != content.String() {
		t.Errorf("non-streamed content differs from the streamed one:\n%s", plain.content)
	}
}

func jsonString(s string) string {
	b := rawjson.AppendString(nil, s)
	return string(b)
}
