package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
)

// The hidden revision's end-to-end tests run the real chain (facts, validate,
// revise) on the RA3 pack against the mock upstream with scripted answers.

const reviseMarker = "[机器可读声明]"

// reviseConfig is a validating RA3 route; %STRIP% and %REVISE% are replaced per
// test.
const reviseConfig = `
server:
  keepalive_interval: 150ms
log: {level: warn}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 5s}
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    upstream_model: deepseek-chat
    pack: ra3
    validate: {strip_claims: %STRIP%}
    revise: %REVISE%
`

func reviseRouteConfig(strip, revise string) string {
	if revise == "" {
		revise = "{}"
	}
	return strings.NewReplacer("%STRIP%", strip, "%REVISE%", revise).Replace(reviseConfig)
}

var replayText = func() string {
	b, err := os.ReadFile("testdata/revise/allied_vs_soviet.txt")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// claimsAnswer renders prose, the marker and a fenced claims block of unit claims
// (raw JSON objects).
func claimsAnswer(prose string, units ...string) string {
	return prose + "\n\n" + reviseMarker + "\n```json\n{\n  \"unitClaims\": [" + strings.Join(units, ",") +
		"],\n  \"eventClaims\": [],\n  \"timelineClaims\": []\n}\n```\n"
}

// The seed's story on allied_vs_soviet.txt.
const (
	claimBomber  = `{"unitId": 733, "player": "PlayerA", "claim": "AlliedBomberAircraft", "evidenceLevel": "highly likely", "evidence": ["select|6:02.00|733"], "alternatives": [], "needsConfirmation": []}`
	claimMCV     = `{"unitId": 587, "player": "PlayerA", "claim": "AlliedMCV", "evidenceLevel": "confirmed", "evidence": ["power|1:41.00|SpecialPower_UnpackReplaceSelf|587"], "alternatives": [], "needsConfirmation": []}`
	claimBase    = `{"unitId": 246, "player": "PlayerA", "claim": "AlliedConstructionYard", "evidenceLevel": "confirmed", "evidence": ["power|1:24.00|SpecialPower_PackReplaceSelf|246"], "alternatives": [], "needsConfirmation": []}`
	claimFighter = `{"unitId": 733, "player": "PlayerA", "claim": "AlliedFighterAircraft", "evidenceLevel": "possible", "evidence": ["select|6:02.00|733", "produce|5:30.00|AlliedFighterAircraft|655"], "alternatives": ["其他空中单位"], "needsConfirmation": ["733 之后是否参与对空作战"]}`
	claimMaybe   = `{"unitId": 587, "player": "PlayerA", "claim": "AlliedMCV", "evidenceLevel": "possible", "evidence": ["power|1:41.00|SpecialPower_UnpackReplaceSelf|587"], "alternatives": ["AlliedMiner"], "needsConfirmation": ["587 之后是否作为建造者出现"]}`

	storyDraftProse = "## 对局概览\nPlayerA（盟军）在 6:02 出动世纪轰炸机 733 空袭苏联基地；587 在 1:41 展开，确认是盟军基地车。"
	storyFixedProse = "## 对局概览\nPlayerA（盟军）在 5:30 生产了第一架战斗机，6:02 选中的 733 可能就是它；587 在 1:41 展开，可能是基地车，也可能是矿车展开的指挥中心。"
)

var (
	storyDraftAnswer = claimsAnswer(storyDraftProse, claimBomber, claimMCV, claimBase)
	storyFixedAnswer = claimsAnswer(storyFixedProse, claimFighter, claimMaybe, claimBase)
)

// answerJSON is one scripted mock answer (YAML is a superset of JSON).
type answerJSON struct {
	Content string         `json:"content,omitempty"`
	Usage   map[string]int `json:"usage,omitempty"`
	Fault   map[string]any `json:"fault,omitempty"`
}

// reviseScript answers the draft with draft and revision requests (those with an
// assistant turn) with revisions in order (the last repeats).
func reviseScript(draft answerJSON, revisions ...answerJSON) string {
	s := map[string]any{"default": draft}
	if len(revisions) > 0 {
		s["rules"] = []any{map[string]any{
			"name":    "revision",
			"match":   map[string]any{"has_assistant": true},
			"answers": revisions,
		}}
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func storyRequest(stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model":  "ra3-analyst",
		"stream": stream,
		"messages": []map[string]string{
			{"role": "system", "content": "你是红警 3 录像分析助手。"},
			{"role": "user", "content": "分析这局录像。\n\n" + replayText},
		},
	})
	return string(b)
}

// clientResult is what one client saw.
type clientResult struct {
	content string
	usage   int
	header  http.Header
}

// viaGoOpenAI sends the story request with go-openai, streamed or not.
func viaGoOpenAI(t *testing.T, h *harness, stream bool) clientResult {
	t.Helper()
	return goOpenAIChat(t, h, goopenai.ChatCompletionRequest{Model: "ra3-analyst", Messages: []goopenai.ChatCompletionMessage{
		{Role: "system", Content: "你是红警 3 录像分析助手。"},
		{Role: "user", Content: "分析这局录像。\n\n" + replayText},
	}}, stream)
}

// goOpenAIChat sends req through the proxy with go-openai, streamed (with
// include_usage) or not, and returns the content, the usage the client saw and
// the response headers.
func goOpenAIChat(t *testing.T, h *harness, req goopenai.ChatCompletionRequest, stream bool) clientResult {
	t.Helper()
	var hdr http.Header
	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	cfg.HTTPClient = &http.Client{Transport: headerTap{next: http.DefaultTransport, last: &hdr}}
	c := goopenai.NewClientWithConfig(cfg)
	ctx := context.Background()
	if !stream {
		resp, err := c.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatalf("go-openai: %v", err)
		}
		return clientResult{content: resp.Choices[0].Message.Content, usage: resp.Usage.TotalTokens, header: hdr}
	}
	req.Stream = true
	req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	s, err := c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatalf("go-openai stream: %v", err)
	}
	defer s.Close()
	var b strings.Builder
	usage := 0
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go-openai stream: %v", err)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage.TotalTokens
		}
		if len(chunk.Choices) > 0 {
			b.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	return clientResult{content: b.String(), usage: usage, header: hdr}
}

// viaOpenAIGo streams the story request with the official openai-go client.
func viaOpenAIGo(t *testing.T, h *harness) clientResult {
	t.Helper()
	c := oa.NewClient(option.WithBaseURL(h.base+"/v1/"), option.WithAPIKey("client-key"), option.WithMaxRetries(0))
	params := oa.ChatCompletionNewParams{
		Model:         "ra3-analyst",
		Messages:      []oa.ChatCompletionMessageParamUnion{oa.SystemMessage("你是红警 3 录像分析助手。"), oa.UserMessage("分析这局录像。\n\n" + replayText)},
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	acc := oa.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("openai-go stream: %v", err)
	}
	if len(acc.Choices) == 0 {
		t.Fatal("openai-go stream: no choices")
	}
	return clientResult{content: acc.Choices[0].Message.Content, usage: int(acc.Usage.TotalTokens)}
}

type headerTap struct {
	next http.RoundTripper
	last *http.Header
}

func (h headerTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	if err == nil {
		*h.last = resp.Header.Clone()
	}
	return resp, err
}

// getTrace asks the proxy for a trace once, as the harness client.
func (h *harness) getTrace(id string) (*http.Response, error) {
	req, err := http.NewRequest("GET", h.base+"/factgate/v1/traces/"+id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", harnessCredential)
	return http.DefaultClient.Do(req)
}

// trace fetches a request's trace from the proxy, as the harness client that made
// the request, once it is stored (storedTrace).
func (h *harness) trace(t testing.TB, id string) gjson.Result {
	t.Helper()
	return gjson.ParseBytes(storedTrace(t, h.base, id, harnessCredential))
}

// chatRequests returns the chat completion requests the mock received.
func (h *harness) chatRequests() int {
	n := 0
	for _, r := range h.mock.Requests() {
		if strings.HasSuffix(r.Path, "/chat/completions") {
			n++
		}
	}
	return n
}
