package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// The scenarios of the OpenAI conformance tests: requests that make factgate
// build its own objects and stream events, shared by the schema test
// (openai_schema_test.go, against the OpenAI OpenAPI spec when it is there) and
// the required-fields test (openai_required_test.go, against the types of
// openai-go, always).

// synthesizedKind says what an object factgate built stands for in the OpenAI
// API, and so what it is checked against.
type synthesizedKind int

const (
	// synthesizedResponse is a Responses object: the spec's Response,
	// openai-go's responses.Response.
	synthesizedResponse synthesizedKind = iota
	// synthesizedResponseEvent is a Responses stream event: one of the spec's
	// ResponseStreamEvent by its type, openai-go's
	// responses.ResponseStreamEventUnion.
	synthesizedResponseEvent
	// synthesizedChatChunk is a chat completion chunk: the spec's
	// CreateChatCompletionStreamResponse, openai-go's openai.ChatCompletionChunk.
	synthesizedChatChunk
	// synthesizedError is an error envelope: the spec's ErrorResponse, an
	// "error" member holding openai-go's shared.ErrorObject.
	synthesizedError
)

// synthesized is one object or stream event factgate built: what it is (for a
// failure message: the model, the scenario, the event) and its JSON.
type synthesized struct {
	what string
	kind synthesizedKind
	raw  []byte
}

// responseLiveNulls are the members of a Response the live API sends as null
// where the spec (and openai-go) type them string and object: "user" when the
// request sets none, "usage" in response.created and response.in_progress. Both
// conformance tests allow null there, and nowhere else the types forbid it.
var responseLiveNulls = [...]string{"user", "usage"}

// sseEvent is one server-sent event: its event name and data.
type sseEvent struct {
	name string
	data []byte
}

// sseEvents splits an event stream into events (comments dropped).
func sseEvents(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != nil {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(line[len("data:"):], " ")
			if cur.data != nil {
				cur.data = append(cur.data, '\n')
			}
			cur.data = append(cur.data, d...)
		}
	}
	if cur.data != nil {
		out = append(out, cur)
	}
	return out
}

// synthesizedScript answers the conformance tests' requests: plain text, a
// reasoning model's answer, tool calls, a cut answer, and a failure after a held
// stream began.
const synthesizedScript = `
rules:
  - match: {last_user: "^think"}
    answer: {reasoning: "Weigh it first.", content: "Thought through."}
  - match: {last_user: "weather"}
    answer:
      tool_calls:
        - id: call_1
          function: {name: get_weather, arguments: '{"city":"Paris"}'}
  - match: {last_user: "^cut"}
    answer: {content: "cut sho", finish_reason: length}
  - match: {last_user: "^late failure"}
    answer:
      latency: 500ms
      fault:
        status: 500
        body: '{"error":{"message":"upstream exploded","type":"server_error","param":null,"code":"boom"}}'
default: {content: "A plain answer."}
`

// eachSynthesized sends requests that make factgate build its own objects and
// hands each to check: a Responses object (non-streamed, and inside
// response.created … response.completed) for a text answer, a reasoning answer,
// tool calls with the request's function tools echoed (with and without
// strict), a cut answer, a request with a user, a refusal and a content filter's
// cut (rendered directly: the mock gives neither); every Responses stream event
// including the error event of a held stream that failed; the chat completion
// chunks of a held stream (content, reasoning, tool calls, the usage chunk,
// a cut answer, the reasoning chunks stream_reasoning sends live); and factgate's
// error envelopes. Both the chat-only upstream's
// plain route (no interceptors) and its RA3 route (held, injected) are driven.
func eachSynthesized(t *testing.T, check func(s synthesized)) {
	t.Helper()
	h := newHarness(t, synthesizedScript, responsesConfig+
		"  - {name: held-chat, models: [held-c], upstream: chatup, pack: ra3, inject: {when: always}}\n"+
		"  - {name: live-reasoning, models: [live-c], upstream: chatup, pack: ra3, inject: {when: always}, stream_reasoning: true}\n")
	tools := `[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	requests := []struct{ name, body string }{
		{"text", `{"model":"%s","input":"hello"}`},
		{"reasoning", `{"model":"%s","input":"think about it","reasoning":{"effort":"low"}}`},
		{"tool calls", `{"model":"%s","input":"What's the weather in Paris?","tools":` + tools + `}`},
		{"tool calls, strict", `{"model":"%s","input":"What's the weather in Paris?","tools":[{"type":"function","name":"get_weather","description":"the weather","strict":true,"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}]}`},
		{"cut", `{"model":"%s","input":"cut it","max_output_tokens":2}`},
		{"with a user", `{"model":"%s","input":"hello","user":"player-1","metadata":{"k":"v"},"temperature":0.5}`},
	}
	for _, model := range []string{"plain-c", "ra3-c"} {
		for _, rq := range requests {
			body := fmt.Sprintf(rq.body, model)
			status, _, resp := h.post(t, "/v1/responses", body)
			if status != 200 {
				t.Fatalf("%s %s: %d %s", model, rq.name, status, resp)
			}
			check(synthesized{model + " " + rq.name + ": the response object", synthesizedResponse, resp})

			streamBody := strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
			status, _, raw := h.post(t, "/v1/responses", streamBody)
			if status != 200 {
				t.Fatalf("%s %s streamed: %d %s", model, rq.name, status, raw)
			}
			events := sseEvents(t, raw)
			if len(events) < 3 {
				t.Fatalf("%s %s streamed: %d events:\n%s", model, rq.name, len(events), raw)
			}
			for i, ev := range events {
				check(synthesized{fmt.Sprintf("%s %s: stream event %d (%s)", model, rq.name, i, ev.name), synthesizedResponseEvent, ev.data})
			}
		}
		// An upstream failure after a held stream's headers went out: the error event.
		status, _, raw := h.post(t, "/v1/responses", `{"stream":true,"model":"`+model+`","input":"late failure"}`)
		if model == "ra3-c" {
			events := sseEvents(t, raw)
			if status != 200 || len(events) == 0 || events[len(events)-1].name != "error" {
				t.Fatalf("%s late failure: %d, want a stream ending with an error event:\n%s", model, status, raw)
			}
			for i, ev := range events {
				check(synthesized{fmt.Sprintf("%s late failure: stream event %d (%s)", model, i, ev.name), synthesizedResponseEvent, ev.data})
			}
		}
	}

	// Chat answers the mock does not give — a refusal, a content filter's cut —
	// rendered as a Responses object and its stream directly.
	for _, a := range []struct{ name, chat, want string }{
		{"refusal", `{"id":"chatcmpl-r","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I cannot help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}`, "event: response.refusal.done"},
		{"content filter", `{"id":"chatcmpl-f","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Part of"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`, "event: response.incomplete"},
	} {
		obj := chatToResponse([]byte(a.chat), []byte(`{"model":"m","input":"x"}`), []byte(`{}`))
		check(synthesized{a.name + ": the response object", synthesizedResponse, obj})
		var stream bytes.Buffer
		if err := writeResponsesStream(bufio.NewWriter(&stream), obj, 8); err != nil || !bytes.Contains(stream.Bytes(), []byte(a.want)) {
			t.Fatalf("%s streamed: %v, want a stream with %s:\n%s", a.name, err, a.want, stream.Bytes())
		}
		for i, ev := range sseEvents(t, stream.Bytes()) {
			check(synthesized{fmt.Sprintf("%s: stream event %d (%s)", a.name, i, ev.name), synthesizedResponseEvent, ev.data})
		}
	}

	// The chat completion chunks factgate synthesizes for a held stream; want is
	// what the stream must carry for the scenario to have happened.
	for _, rq := range []struct{ name, body, want string }{
		{"text", `{"model":"held-c","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`, `"usage":{`},
		{"reasoning", `{"model":"held-c","stream":true,"messages":[{"role":"user","content":"think about it"}]}`, `"reasoning_content"`},
		{"tool calls", `{"model":"held-c","stream":true,"messages":[{"role":"user","content":"What's the weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`, `"tool_calls"`},
		{"cut", `{"model":"held-c","stream":true,"messages":[{"role":"user","content":"cut it"}]}`, `"finish_reason":"length"`},
		{"live reasoning", `{"model":"live-c","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"think about it"}]}`, `"reasoning_content"`},
	} {
		status, _, raw := h.post(t, "/v1/chat/completions", rq.body)
		if status != 200 || !bytes.Contains(raw, []byte(rq.want)) {
			t.Fatalf("chat %s: %d, want a stream with %s:\n%s", rq.name, status, rq.want, raw)
		}
		events := sseEvents(t, raw)
		if len(events) < 2 || string(events[len(events)-1].data) != "[DONE]" {
			t.Fatalf("chat %s: not a stream ending in [DONE]:\n%s", rq.name, raw)
		}
		for i, ev := range events[:len(events)-1] {
			check(synthesized{fmt.Sprintf("chat %s: chunk %d", rq.name, i), synthesizedChatChunk, ev.data})
		}
	}

	// factgate's own errors.
	for _, rq := range []struct{ name, path, body string }{
		{"model_not_found (chat)", "/v1/chat/completions", `{"model":"nobody-serves-this","messages":[{"role":"user","content":"hi"}]}`},
		{"model_not_found (responses)", "/v1/responses", `{"model":"nobody-serves-this","input":"hi"}`},
		{"unsupported_parameter", "/v1/responses", `{"model":"ra3-c","input":"x","previous_response_id":"resp_1"}`},
		{"invalid_json", "/v1/chat/completions", `{"model":`},
	} {
		status, _, body := h.post(t, rq.path, rq.body)
		if status < 400 {
			t.Fatalf("%s: %d %s", rq.name, status, body)
		}
		check(synthesized{rq.name, synthesizedError, body})
	}
}
