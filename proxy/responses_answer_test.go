package proxy

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// newResponsesExchange is the exchange of a Responses request on an api: responses
// upstream, as handleResponses builds it.
func newResponsesExchange(t *testing.T, request string) *responsesExchange {
	t.Helper()
	chat, err := translateResponsesRequest([]byte(request), false, "up")
	if err != nil {
		t.Fatal(err.Message)
	}
	return &responsesExchange{request: []byte(request), chat0: chat}
}

func TestResponsesRequestForTheUpstream(t *testing.T) {
	t.Parallel()
	const request = `{"model":"ra3","instructions":"app rules","input":[{"role":"developer","content":"dev rules"},{"role":"user","content":[{"type":"input_text","text":"log"},{"type":"input_image","file_id":"file_1"}]}],"stream":true,"stream_options":{"include_obfuscation":false},"metadata":{"factgate.session":"s","app":"a"},"x_ext":{"k":1}}`
	rx := newResponsesExchange(t, request)
	// What the request phases make of it: the model mapped, the system messages
	// merged into one injected prompt, factgate's metadata stripped, a variant's
	// temperature and max_tokens.
	base := rx.chat0
	base, _ = sjson.SetBytes(base, "model", "gpt-5")
	base, _ = sjson.SetRawBytes(base, "metadata", []byte(`{"app":"a"}`))
	base, _ = sjson.SetRawBytes(base, "temperature", []byte(`0.2`))
	base, _ = sjson.SetRawBytes(base, "max_tokens", []byte(`800`))
	base, _ = sjson.DeleteBytes(base, "messages.0")
	base, _ = sjson.SetRawBytes(base, "messages.0", []byte(`{"role":"system","content":"KNOWLEDGE\n\napp rules\n\ndev rules"}`))

	draft, _ := sjson.SetBytes(base, "stream", false)
	out, hidden, ok := rx.requestFor(base, draft, false)
	if !ok || hidden {
		t.Fatalf("ok %v hidden %v", ok, hidden)
	}
	r := gjson.ParseBytes(out)
	if r.Get("instructions").Str != "KNOWLEDGE\n\napp rules\n\ndev rules" {
		t.Errorf("instructions %q", r.Get("instructions").Str)
	}
	if in := r.Get("input").Array(); len(in) != 1 || in[0].Raw != `{"role":"user","content":[{"type":"input_text","text":"log"},{"type":"input_image","file_id":"file_1"}]}` {
		t.Errorf("input %s: want the developer message gone and the user item byte for byte", r.Get("input").Raw)
	}
	if r.Get("model").Str != "gpt-5" || r.Get("temperature").Raw != "0.2" || r.Get("max_output_tokens").Raw != "800" || r.Get("metadata").Raw != `{"app":"a"}` {
		t.Errorf("fields the chain set: %s", out)
	}
	if r.Get("max_tokens").Exists() || r.Get("messages").Exists() {
		t.Errorf("chat fields leaked into the Responses request: %s", out)
	}
	if r.Get("stream").Raw != "false" || r.Get("stream_options").Exists() || r.Get("store").Exists() {
		t.Errorf("stream, stream_options, store: %s", out)
	}
	if r.Get("x_ext").Raw != `{"k":1}` {
		t.Errorf("an unknown field was not kept: %s", out)
	}

	// A revision: the draft and the revision turn appended.
	rev, _ := sjson.SetRawBytes(draft, "messages.-1", []byte(`{"role":"assistant","content":"the draft"}`))
	rev, _ = sjson.SetRawBytes(rev, "messages.-1", []byte(`{"role":"user","content":"fix it"}`))
	out, hidden, ok = rx.requestFor(base, rev, false)
	if !ok || !hidden {
		t.Fatalf("revision: ok %v hidden %v", ok, hidden)
	}
	in := gjson.GetBytes(out, "input").Array()
	if len(in) != 3 || in[1].Raw != `{"role":"assistant","content":"the draft"}` || in[2].Raw != `{"role":"user","content":"fix it"}` {
		t.Errorf("revision input %s", gjson.GetBytes(out, "input").Raw)
	}
	if gjson.GetBytes(out, "store").Raw != "false" {
		t.Errorf("a hidden call must not be stored: %s", out)
	}

	// A judge call is no continuation of the conversation.
	if _, _, ok := rx.requestFor(base, []byte(`{"model":"judge","messages":[{"role":"system","content":"judge"},{"role":"user","content":"x"}]}`), false); ok {
		t.Error("a judge call was taken for the conversation")
	}
}

func TestResponsesRequestForAStringInput(t *testing.T) {
	t.Parallel()
	rx := newResponsesExchange(t, `{"model":"m","input":"the log","previous_response_id":"resp_0"}`)
	rev, _ := sjson.SetRawBytes(rx.chat0, "messages.-1", []byte(`{"role":"assistant","content":"draft"}`))
	out, _, ok := rx.requestFor(rx.chat0, rev, false)
	if !ok {
		t.Fatal("not a continuation")
	}
	want := `{"model":"m","input":[{"role":"user","content":"the log"},{"role":"assistant","content":"draft"}],"previous_response_id":"resp_0","store":false}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	// Nothing changed: the client's request as it came.
	if out, _, _ := rx.requestFor(rx.chat0, rx.chat0, false); string(out) != string(rx.request) {
		t.Errorf("an untouched request changed: %s", out)
	}
}

func TestChatToResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, chat string
		check      func(t *testing.T, r gjson.Result)
	}{
		{
			desc: "text, reasoning, usage details, an extension",
			chat: `{"id":"c1","object":"chat.completion","created":7,"model":"m","system_fingerprint":"fp","x_provider":{"r":"eu"},
				"choices":[{"index":0,"message":{"role":"assistant","content":"hi","reasoning_content":"think"},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}}`,
			check: func(t *testing.T, r gjson.Result) {
				if r.Get("id").Str != "resp_c1" || r.Get("created_at").Int() != 7 || r.Get("status").Str != "completed" || r.Get("system_fingerprint").Exists() {
					t.Errorf("head %s", r.Raw)
				}
				if r.Get("output.0.type").Str != "reasoning" || r.Get("output.0.summary.0.text").Str != "think" || r.Get("output.1.content.0.text").Str != "hi" {
					t.Errorf("output %s", r.Get("output").Raw)
				}
				if r.Get("usage").Raw != `{"input_tokens":10,"input_tokens_details":{"cached_tokens":3,"cache_write_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":14}` {
					t.Errorf("usage %s", r.Get("usage").Raw)
				}
				if r.Get("x_provider.r").Str != "eu" {
					t.Error("the provider extension was lost")
				}
			},
		},
		{
			desc: "tool calls only",
			chat: `{"id":"c2","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			check: func(t *testing.T, r gjson.Result) {
				out := r.Get("output").Array()
				if len(out) != 1 || out[0].Get("type").Str != "function_call" || out[0].Get("call_id").Str != "call_1" || out[0].Get("name").Str != "w" || out[0].Get("id").Str != "fc_call_1" {
					t.Errorf("output %s", r.Get("output").Raw)
				}
				if r.Get("usage").Type != gjson.Null {
					t.Errorf("usage %s", r.Get("usage").Raw)
				}
			},
		},
		{
			desc: "cut at the length limit",
			chat: `{"id":"c3","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"cut"},"finish_reason":"length"}]}`,
			check: func(t *testing.T, r gjson.Result) {
				if r.Get("status").Str != "incomplete" || r.Get("incomplete_details.reason").Str != "max_output_tokens" || r.Get("output.0.status").Str != "incomplete" {
					t.Errorf("%s", r.Raw)
				}
			},
		},
		{
			desc: "a refusal",
			chat: `{"id":"c4","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"no"},"finish_reason":"stop"}]}`,
			check: func(t *testing.T, r gjson.Result) {
				if parts := r.Get("output.0.content").Array(); len(parts) != 1 || parts[0].Get("type").Str != "refusal" || parts[0].Get("refusal").Str != "no" {
					t.Errorf("%s", r.Get("output").Raw)
				}
			},
		},
	}
	request := []byte(`{"model":"alias","instructions":"app","input":"x","tools":[{"type":"function","name":"w"}],"temperature":0.5}`)
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			b := chatToResponse([]byte(tc.chat), request, []byte(`{"metadata":{"app":"a"}}`))
			if !gjson.ValidBytes(b) {
				t.Fatalf("invalid JSON: %s", b)
			}
			r := gjson.ParseBytes(b)
			if r.Get("instructions").Str != "app" || r.Get("temperature").Raw != "0.5" || r.Get("tools.0.name").Str != "w" || r.Get("metadata.app").Str != "a" || r.Get("object").Str != "response" {
				t.Errorf("the request's settings are not echoed: %s", b)
			}
			tc.check(t, r)
		})
	}
}

func TestPatchResponse(t *testing.T) {
	t.Parallel()
	draft := []byte(`{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[{"id":"rs_1","type":"reasoning","summary":[]},` +
		`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"wrong ","annotations":[{"type":"url_citation","start_index":0}],"logprobs":[]},{"type":"output_text","text":"claim","annotations":[]}]}],` +
		`"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":2},"output_tokens":5,"total_tokens":15},"x_ext":1}`)
	draftChat := responseToChat(draft)
	if c := gjson.GetBytes(draftChat, "choices.0.message.content").Str; c != "wrong claim" {
		t.Fatalf("the draft's content %q", c)
	}
	if got := patchResponse(draft, draftChat, draftChat, ""); !bytes.Equal(got, draft) {
		t.Errorf("an answer nothing changed is not byte for byte:\n%s", got)
	}
	final, _ := sjson.SetBytes(draftChat, "choices.0.message.content", "right claim")
	final, _ = sjson.SetRawBytes(final, "usage", []byte(`{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}`))
	got := gjson.ParseBytes(patchResponse(draft, draftChat, final, "ra3-analyst"))
	parts := got.Get("output.1.content").Array()
	if len(parts) != 1 || parts[0].Get("text").Str != "right claim" || parts[0].Get("annotations").Raw != "[]" {
		t.Errorf("content %s", got.Get("output.1.content").Raw)
	}
	if got.Get("usage.input_tokens").Int() != 30 || got.Get("usage.output_tokens").Int() != 9 || got.Get("usage.total_tokens").Int() != 39 || got.Get("usage.input_tokens_details.cached_tokens").Int() != 2 {
		t.Errorf("usage %s", got.Get("usage").Raw)
	}
	if got.Get("model").Str != "ra3-analyst" || got.Get("id").Str != "resp_1" || got.Get("x_ext").Raw != "1" || got.Get("output.0.id").Str != "rs_1" {
		t.Errorf("%s", got.Raw)
	}
	// A revision that ran into the limit.
	cut, _ := sjson.SetBytes(final, "choices.0.finish_reason", "length")
	got = gjson.ParseBytes(patchResponse(draft, draftChat, cut, ""))
	if got.Get("status").Str != "incomplete" || got.Get("incomplete_details.reason").Str != "max_output_tokens" {
		t.Errorf("status %s", got.Raw)
	}
}

func TestWriteResponsesStream(t *testing.T) {
	t.Parallel()
	obj := []byte(`{"id":"resp_1","object":"response","status":"completed","output":[` +
		`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ab","annotations":[]},{"type":"refusal","refusal":"no"}]},` +
		`{"id":"fc_1","type":"function_call","status":"completed","call_id":"c1","name":"w","arguments":"{\"a\":1}"},` +
		`{"id":"ws_1","type":"web_search_call","status":"completed"}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeResponsesStream(w, obj, 1, "X-Factgate-Revisions: 0"); err != nil {
		t.Fatal(err)
	}
	var types []string
	var args, text strings.Builder
	seq := int64(0)
	for _, ev := range strings.Split(strings.TrimSpace(buf.String()), "\n\n") {
		lines := strings.Split(ev, "\n")
		for len(lines) > 0 && strings.HasPrefix(lines[0], ": ") {
			lines = lines[1:] // comments
		}
		if len(lines) == 0 {
			continue
		}
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("malformed event %q", ev)
		}
		data := gjson.Parse(strings.TrimPrefix(lines[1], "data: "))
		if typ := strings.TrimPrefix(lines[0], "event: "); data.Get("type").Str != typ {
			t.Errorf("event %s carries type %s", typ, data.Get("type").Str)
		}
		if data.Get("sequence_number").Int() != seq {
			t.Errorf("sequence_number %d, want %d", data.Get("sequence_number").Int(), seq)
		}
		seq++
		types = append(types, data.Get("type").Str)
		switch data.Get("type").Str {
		case "response.output_text.delta":
			text.WriteString(data.Get("delta").Str)
		case "response.function_call_arguments.delta":
			args.WriteString(data.Get("delta").Str)
		case "response.created":
			if data.Get("response.status").Str != "in_progress" || data.Get("response.output").Raw != "[]" || data.Get("response.usage").Type != gjson.Null {
				t.Errorf("response.created %s", data.Raw)
			}
		case "response.completed":
			if data.Get("response").Raw != string(obj) {
				t.Errorf("response.completed does not carry the response")
			}
		}
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.content_part.added", "response.refusal.delta", "response.refusal.delta", "response.refusal.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.delta", "response.function_call_arguments.delta", "response.function_call_arguments.delta", "response.function_call_arguments.delta", // {"a":1}, a rune each
		"response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.output_item.done", "response.completed"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("events\n%v\nwant\n%v", types, want)
	}
	if text.String() != "ab" || args.String() != `{"a":1}` {
		t.Errorf("text %q args %q", text.String(), args.String())
	}
	if i, j := strings.Index(buf.String(), ": X-Factgate-Revisions: 0"), strings.Index(buf.String(), "event: response.completed"); i < 0 || i > j {
		t.Error("the comment is not just before the terminal event")
	}
}

func TestWriteResponsesStreamError(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	_ = writeResponsesStreamError(w, []byte(`{"error":{"message":"boom","type":"server_error","param":null,"code":"x"}}`))
	ev := strings.TrimSpace(buf.String())
	if !strings.HasPrefix(ev, "event: error\ndata: ") {
		t.Fatalf("%q", ev)
	}
	d := gjson.Parse(strings.TrimPrefix(ev, "event: error\ndata: "))
	if d.Get("type").Str != "error" || d.Get("message").Str != "boom" || d.Get("code").Str != "x" || d.Get("error.message").Str != "boom" || !d.Get("sequence_number").Exists() {
		t.Errorf("%s", d.Raw)
	}
}

// TestAResponseEchoesFunctionToolsAndUsageAsTheSpecRequires: the two places the
// OpenAI spec's Response was broken on a chat upstream — a function tool echoed
// without "strict" (FunctionTool requires it, and "parameters"), and
// usage.input_tokens_details without "cache_write_tokens" — while "user": null
// stays as the live API sends it. (TestSynthesizedObjectsConformToTheOpenAISpec
// checks every object against the spec itself.)
func TestAResponseEchoesFunctionToolsAndUsageAsTheSpecRequires(t *testing.T) {
	t.Parallel()
	chat := `{"id":"c1","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":3,"cache_write_tokens":4}}}`
	request := `{"model":"m","input":"x","tools":[
		{"type":"function","name":"a","parameters":{"type":"object"}},
		{"type":"function","name":"b","description":"d","strict":true,"parameters":{"type":"object","properties":{},"additionalProperties":false}},
		{"type":"function","name":"c","strict":null},
		{"type":"web_search"}]}`
	got := chatToResponse([]byte(chat), []byte(request), []byte(`{}`))
	if !gjson.ValidBytes(got) {
		t.Fatalf("not JSON: %s", got)
	}
	for _, c := range []struct{ path, want string }{
		{"tools.0", `{"type":"function","name":"a","parameters":{"type":"object"},"strict":false}`},
		{"tools.1", `{"type":"function","name":"b","description":"d","strict":true,"parameters":{"type":"object","properties":{},"additionalProperties":false}}`},
		{"tools.2", `{"type":"function","name":"c","parameters":null,"strict":false}`},
		{"tools.3", `{"type":"web_search"}`},
		{"usage.input_tokens_details", `{"cached_tokens":3,"cache_write_tokens":4}`},
		{"user", `null`},
	} {
		if r := gjson.GetBytes(got, c.path).Raw; r != c.want {
			t.Errorf("%s = %s, want %s", c.path, r, c.want)
		}
	}
	noDetails := chatToResponse([]byte(`{"id":"c2","choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`), []byte(`{"input":"x","user":"u1"}`), nil)
	if r := gjson.GetBytes(noDetails, "usage.input_tokens_details").Raw; r != `{"cached_tokens":0,"cache_write_tokens":0}` {
		t.Errorf("usage.input_tokens_details without the upstream's details = %s", r)
	}
	if r := gjson.GetBytes(noDetails, "user").Raw; r != `"u1"` {
		t.Errorf("user = %s, want the request's", r)
	}
}
