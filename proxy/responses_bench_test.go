package proxy

import (
	"bufio"
	"io"
	"os"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"
)

// storyResponsesRequest is the sample replay (23 KB) as a Responses request: the
// app's instructions and the replay in an input_text part.
func storyResponsesRequest(b *testing.B) []byte {
	b.Helper()
	replay, err := os.ReadFile("testdata/revise/allied_vs_soviet.txt")
	if err != nil {
		b.Fatal(err)
	}
	body, _ := sjson.SetBytes([]byte(`{"model":"ra3-analyst","instructions":"你是红警 3 录像分析助手。","temperature":0.35,"input":[{"role":"user","content":[{"type":"input_text","text":""}]}]}`),
		"input.0.content.0.text", "分析这局录像。\n\n"+string(replay))
	return body
}

// BenchmarkTranslateResponsesRequest measures translating the story's Responses
// request into the chat completion the chain works on.
func BenchmarkTranslateResponsesRequest(b *testing.B) {
	body := storyResponsesRequest(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := translateResponsesRequest(body, true, "up"); err != nil {
			b.Fatal(err.Message)
		}
	}
}

// BenchmarkResponsesAnswer measures rendering a chat answer (the clean analysis,
// 3 KB) as a Responses object and as its event stream.
func BenchmarkResponsesAnswer(b *testing.B) {
	caseJSON, err := os.ReadFile("testdata/bench/c01_clean.json")
	if err != nil {
		b.Fatal(err)
	}
	chat, _ := sjson.SetBytes([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":64,"total_tokens":576}}`),
		"choices.0.message.content", gjson.GetBytes(caseJSON, "answer").Str)
	request := storyResponsesRequest(b)
	b.Run("object", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			chatToResponse(chat, request, nil)
		}
	})
	b.Run("stream", func(b *testing.B) {
		obj := chatToResponse(chat, request, nil)
		w := bufio.NewWriter(io.Discard)
		b.ReportAllocs()
		for b.Loop() {
			if err := writeResponsesStream(w, obj, 32); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkResponsesValidatingRoute is BenchmarkValidatingRoute through
// POST /v1/responses on an api: chat upstream: the same chain plus the
// translation of the request and of the answer.
func BenchmarkResponsesValidatingRoute(b *testing.B) {
	s := benchValidatingServer(b)
	benchPost(b, s, "/v1/responses", storyResponsesRequest(b), func(rc *fasthttp.RequestCtx) bool {
		return rc.Response.StatusCode() == 200 && string(rc.Response.Header.Peek("X-Factgate-Issues")) == "draft=0;final=0;delivered=0" &&
			gjson.GetBytes(rc.Response.Body(), "object").Str == "response"
	})
}
