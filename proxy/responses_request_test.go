package proxy

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestTranslateResponsesRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, in string
		want     string // the chat request, compared as JSON
	}{
		{
			desc: "instructions and a string input",
			in:   `{"model":"m","instructions":"be brief","input":"hi","temperature":0.2,"stream":true,"stream_options":{"include_obfuscation":false}}`,
			want: `{"model":"m","temperature":0.2,"stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`,
		},
		{
			desc: "message items: parts, a developer message, an assistant turn fed back",
			in: `{"model":"m","input":[
				{"role":"developer","content":"rules"},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://x/i.png","detail":"low"}]},
				{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"a","annotations":[]},{"type":"output_text","text":"b","annotations":[]}]},
				{"type":"reasoning","id":"rs_1","summary":[]},
				{"role":"user","content":"and?"}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"rules"},{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/i.png","detail":"low"}}]},{"role":"assistant","content":"ab"},{"role":"user","content":"and?"}]}`,
		},
		{
			desc: "function calls join the assistant turn before them; outputs become tool messages",
			in: `{"model":"m","input":[{"role":"user","content":"weather?"},
				{"type":"message","role":"assistant","content":[{"type":"output_text","text":"checking"}]},
				{"type":"function_call","call_id":"c1","name":"w","arguments":"{\"city\":\"Paris\"}","id":"fc_1","status":"completed"},
				{"type":"function_call","call_id":"c2","name":"w","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":"18"},
				{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
				{"type":"function_call","call_id":"c3","name":"x","arguments":"{}"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":"checking","tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}},{"id":"c2","type":"function","function":{"name":"w","arguments":"{}"}}]},{"role":"tool","content":"18","tool_call_id":"c1"},{"role":"tool","content":"a\nb","tool_call_id":"c2"},{"role":"assistant","content":null,"tool_calls":[{"id":"c3","type":"function","function":{"name":"x","arguments":"{}"}}]}]}`,
		},
		{
			desc: "tools, tool_choice, text.format, reasoning, max_output_tokens, extensions",
			in: `{"model":"m","input":"x","tools":[{"type":"function","name":"w","description":"d","parameters":{"type":"object"},"strict":true}],
				"tool_choice":{"type":"function","name":"w"},"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true},"verbosity":"low"},
				"reasoning":{"effort":"high","summary":"auto"},"max_output_tokens":100,"include":["reasoning.encrypted_content"],"store":false,"truncation":"disabled",
				"metadata":{"a":"b"},"seed":7}`,
			want: `{"model":"m","tools":[{"type":"function","function":{"name":"w","description":"d","parameters":{"type":"object"},"strict":true}}],"tool_choice":{"type":"function","function":{"name":"w"}},"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"strict":true}},"verbosity":"low","reasoning_effort":"high","max_tokens":100,"metadata":{"a":"b"},"seed":7,"messages":[{"role":"user","content":"x"}]}`,
		},
		{
			desc: "json_object and text formats",
			in:   `{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`,
			want: `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x"}]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := translateResponsesRequest([]byte(tc.in), true, "up")
			if err != nil {
				t.Fatalf("error %s", err.Envelope())
			}
			if !gjson.ValidBytes(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			if g, w := normJSON(t, string(got)), normJSON(t, tc.want); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

// normJSON re-encodes a JSON text without insignificant white space, members in
// order.
func normJSON(t *testing.T, s string) string {
	t.Helper()
	if !gjson.Valid(s) {
		t.Fatalf("invalid JSON: %s", s)
	}
	out := gjson.Parse(s).Get("@ugly").Raw
	if out == "" {
		t.Fatalf("cannot normalize %s", s)
	}
	return out
}

func TestTranslateResponsesRequestRefusesWhatChatCannotCarry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, param string
	}{
		{`{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"m","input":"x","conversation":"conv_1"}`, "conversation"},
		{`{"model":"m","input":"x","store":true}`, "store"},
		{`{"model":"m","input":"x","background":true}`, "background"},
		{`{"model":"m","input":"x","truncation":"auto"}`, "truncation"},
		{`{"model":"m","input":"x","include":["message.output_text.logprobs"]}`, "include"},
		{`{"model":"m","input":"x","prompt":{"id":"p"}}`, "prompt"},
		{`{"model":"m","input":"x","top_logprobs":2}`, "top_logprobs"},
		{`{"model":"m","input":"x","tools":[{"type":"file_search","vector_store_ids":["v"]}]}`, "tools[0].type"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"w","parameters":{},"strict":true,"defer_loading":true}]}`, "tools[0].defer_loading"},
		{`{"model":"m","input":"x","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}}`, "tool_choice"},
		{`{"model":"m","input":"x","text":{"format":{"type":"grammar"}}}`, "text.format.type"},
		{`{"model":"m","input":"x","reasoning":{"effort":"low","mode":"x"}}`, "reasoning.mode"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file_1"}]}]}`, "input[0].content[0].file_id"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/f.pdf"}]}]}`, "input[0].content[0].file_url"},
		{`{"model":"m","input":[{"role":"user","content":"x"},{"type":"web_search_call","id":"ws_1","status":"completed"}]}`, "input[1].type"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0]"},
		{`{"model":"m","input":[{"id":"msg_1"}]}`, "input[0]"},
		{`{"model":"m","input":"x","messages":[]}`, "messages"},
		{`{"model":"m","input":"x","n":2}`, "n"},
		{`{"model":"m"}`, "input"},
		{`{"model":"m","input":7}`, "input"},
	}
	for _, tc := range tests {
		_, err := translateResponsesRequest([]byte(tc.in), true, "deepseek")
		if err == nil || err.Status != 400 || err.Param != tc.param || !strings.HasPrefix(err.Message, tc.param+":") {
			t.Errorf("%s: %v, want 400 naming %s", tc.in, err, tc.param)
			continue
		}
		if err.Code == "unsupported_parameter" && !strings.Contains(err.Message, `upstream "deepseek"`) {
			t.Errorf("%s: the message does not name the upstream: %s", tc.in, err.Message)
		}
		// The lenient view (an api: responses upstream gets the request itself)
		// leaves out what it cannot express.
		if tc.param == "input" {
			continue
		}
		if view, err := translateResponsesRequest([]byte(tc.in), false, "openai"); err != nil || !gjson.ValidBytes(view) {
			t.Errorf("%s: lenient view %s, %v", tc.in, view, err)
		}
	}
}

func TestTranslateResponsesRequestAcceptsUnusedStatefulFields(t *testing.T) {
	t.Parallel()
	in := `{"model":"m","input":"x","previous_response_id":null,"store":false,"background":false,"truncation":"disabled","include":[],"conversation":null}`
	got, err := translateResponsesRequest([]byte(in), true, "up")
	if err != nil {
		t.Fatal(err.Message)
	}
	if want := `{"model":"m","messages":[{"role":"user","content":"x"}]}`; string(got) != want {
		t.Errorf("got %s", got)
	}
}
