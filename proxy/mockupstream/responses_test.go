package mockupstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	openaigo "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

const responsesScript = `
rules:
  - name: revision
    match: {has_assistant: true, last_user: "^fix"}
    answer: {content: "the revision"}
  - name: weather
    match: {last_user: "weather", has_assistant: false}
    answer:
      tool_calls:
        - id: call_1
          function: {name: get_weather, arguments: '{"city":"Paris"}'}
  - name: tool result
    match: {any_message: "\"temp\""}
    answer: {content: "It is 18 °C."}
  - name: json
    match: {response_format: json_schema}
    answer: {content: '{"ok":true}'}
  - name: by instructions
    match: {system: "^be brief$"}
    answer:
      reasoning: "先想一想。"
      content: "简短的回答，分几块发出。"
      chunk_size: 3
      usage: {prompt_tokens: 100}
  - name: cut
    match: {last_user: "^cut"}
    answer: {content: "cu", finish_reason: length}
  - name: limited
    match: {last_user: "^fault:429"}
    answer:
      fault:
        status: 429
        body: '{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}'
`

func newResponsesClient(s *Server) openaigo.Client { return newOpenAIGo(s) }

func TestResponsesEndpointAnswersFromTheScript(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, responsesScript), Options{})
	c := newResponsesClient(s)
	ctx := context.Background()
	text := func(s string) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: openaigo.String(s)}
	}

	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Instructions: openaigo.String("be brief"), Input: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() != "简短的回答，分几块发出。" || r.Output[0].Type != "reasoning" || r.Output[0].Summary[0].Text != "先想一想。" {
		t.Errorf("answer %s", r.RawJSON())
	}
	if r.Usage.InputTokens != 100 || r.Usage.OutputTokens != int64(CompletionTokens("简短的回答，分几块发出。", "先想一想。")) || r.Usage.OutputTokensDetails.ReasoningTokens != int64(Tokens("先想一想。")) {
		t.Errorf("usage %+v", r.Usage)
	}
	if r.Status != "completed" || r.Model != "m" || !strings.HasPrefix(r.ID, "resp_mock_") {
		t.Errorf("head %s", r.RawJSON())
	}

	// Streamed: the same text in pieces of chunk_size runes, in order.
	st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Instructions: openaigo.String("be brief"), Input: text("hi")})
	var deltas []string
	var types []string
	var final responses.Response
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != int64(len(types)-1) {
			t.Errorf("event %s has sequence_number %d", ev.Type, ev.SequenceNumber)
		}
		switch ev.Type {
		case "response.output_text.delta":
			deltas = append(deltas, ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(deltas, "") != r.OutputText() || deltas[0] != "简短的" {
		t.Errorf("deltas %q", deltas)
	}
	if final.OutputText() != r.OutputText() || types[0] != "response.created" || types[1] != "response.in_progress" {
		t.Errorf("events %v", types)
	}

	// A revision request: the draft as an assistant turn, then a user turn.
	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("analyse", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfMessage("draft", responses.EasyInputMessageRoleAssistant),
		responses.ResponseInputItemParamOfMessage("fix it", responses.EasyInputMessageRoleUser),
	}}})
	if err != nil || r.OutputText() != "the revision" {
		t.Errorf("revision: %v %s", err, r.RawJSON())
	}

	// Tool calls out, the tool's result in.
	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("weather in Paris?")})
	if err != nil || len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Output[0].CallID != "call_1" || r.Output[0].Arguments.OfString != `{"city":"Paris"}` {
		t.Errorf("tool call: %v %s", err, r.RawJSON())
	}
	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_1", "get_weather"),
		{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openaigo.String("call_1"),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openaigo.String(`{"temp":18}`)}}},
	}}})
	if err != nil || r.OutputText() != "It is 18 °C." {
		t.Errorf("tool result: %v %s", err, r.RawJSON())
	}

	// text.format matches response_format.
	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("json please"), Text: responses.ResponseTextConfigParam{
		Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "x", Schema: map[string]any{"type": "object"}}},
	}})
	if err != nil || r.OutputText() != `{"ok":true}` {
		t.Errorf("json: %v %s", err, r.RawJSON())
	}

	// finish_reason length: incomplete.
	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("cut it")})
	if err != nil || r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("cut: %v %s", err, r.RawJSON())
	}

	// A status fault is sent as it is.
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: text("fault:429")})
	var apiErr *openaigo.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Errorf("fault: %v", err)
	}
}

func TestResponsesEndpointStoresAnswers(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, `default: {content: "kept"}`), Options{})
	c := newResponsesClient(s)
	ctx := context.Background()
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openaigo.String("remember")}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.RawJSON() != r.RawJSON() {
		t.Fatalf("GET: %v\n%s\n%s", err, got.RawJSON(), r.RawJSON())
	}
	items, err := c.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || !strings.Contains(items.Data[0].RawJSON(), `"text":"remember"`) {
		t.Fatalf("input_items: %v %s", err, items.RawJSON())
	}
	if err := c.Responses.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err == nil {
		t.Error("GET after DELETE found the response")
	}
	// store: false keeps nothing.
	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Store: openaigo.Bool(false), Input: responses.ResponseNewParamsInputUnion{OfString: openaigo.String("forget")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err == nil {
		t.Error("an answer with store false was kept")
	}
	s.Reset()
	if resp, _ := post(t, s, "/v1/responses", `{"input":"x"}`, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a request without a model: %d", resp.StatusCode)
	}
	if resp, body := post(t, s, "/v1/responses", `{"model":"m"}`, nil); resp.StatusCode != http.StatusBadRequest || gjson.GetBytes(body, "error.param").Str != "input" {
		t.Errorf("a request without input: %d %s", resp.StatusCode, body)
	}
	recs := s.Requests()
	if len(recs) != 2 || recs[0].Rule != "" {
		t.Errorf("recorded %d requests", len(recs))
	}
}

func TestResponsesEndpointStreamFaults(t *testing.T) {
	t.Parallel()
	s := startMock(t, mustParse(t, `
rules:
  - match: {last_user: "^disconnect"}
    answer: {content: "a long answer cut off", chunk_size: 2, fault: {disconnect_after: 4}}
  - match: {last_user: "^malformed"}
    answer: {content: "x", fault: {malformed: true}}
`), Options{})
	c := newResponsesClient(s)
	for _, in := range []string{"disconnect", "malformed"} {
		st := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openaigo.String(in)}})
		n := 0
		for st.Next() {
			n++
		}
		if st.Err() == nil {
			t.Errorf("%s: the stream ended cleanly after %d events", in, n)
		}
	}
}
