package interceptors

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// The readers as they were before the one-walk spans: one gjson.Get over the whole
// body each. The spans must give the same answers on every body.

func refHasMessage(body string) bool {
	found := false
	gjson.Get(body, "choices").ForEach(func(_, choice gjson.Result) bool {
		found = choice.Get("message").IsObject()
		return !found
	})
	return found
}

func refNumChoices(body string) int {
	n := 0
	gjson.Get(body, "choices").ForEach(func(_, _ gjson.Result) bool { n++; return true })
	return n
}

func refChoiceField(body string, i int, path string) gjson.Result {
	return gjson.Get(body, "choices."+strconv.Itoa(i)+"."+path)
}

func refHasToolCalls(body string, i int) bool {
	msg := refChoiceField(body, i, "message")
	if tc := msg.Get("tool_calls"); tc.IsArray() && tc.Get("#").Int() > 0 {
		return true
	}
	return msg.Get("function_call").IsObject()
}

func refContentValue(body string, i int) (off, n int, ok bool) {
	msg := refChoiceField(body, i, "message")
	if !msg.IsObject() || msg.Index <= 0 {
		return 0, 0, false
	}
	rawjson.EachMember(msg.Raw, func(m rawjson.Member) bool {
		if rawjson.KeyIs(m.Key, "content") {
			off, n, ok = msg.Index+m.Off, len(m.Raw), true
			return false
		}
		return true
	})
	return off, n, ok
}

func refUsage(body string) Usage {
	if body == "" {
		return Usage{}
	}
	return parseUsage(gjson.Get(body, "usage"))
}

var answerPaths = []string{
	"message", "message.content", "message.tool_calls", "message.function_call", "message.role",
	"finish_reason", "index", "message.tool_calls.0.id", "message.tool_calls.#", "message.content.0.text",
	"logprobs", "message.refusal",
}

func checkAnswerReaders(t *testing.T, body string) {
	t.Helper()
	checkReaders(t, body, &Response{Status: 200, Body: []byte(body)})
	if rawjson.ValidString(body, rawjson.DefaultMaxDepth) {
		// As the proxy handed it over: checked, and marked so.
		r := &Response{Status: 200, Body: []byte(body)}
		r.MarkValid()
		checkReaders(t, body, r)
	}
	// As the proxy hands it over: checked by CheckJSON, with Check's verdict at
	// every depth bound, and read in the same pass.
	for _, depth := range []int{0, 1, 2, 3, 4, 64} {
		r := &Response{Status: 200, Body: []byte(body)}
		ok := r.CheckJSON(depth)
		if want := rawjson.CheckString(body, depth) == nil; ok != want {
			t.Fatalf("CheckJSON(%d) of %s = %v, want %v", depth, body, ok, want)
		}
		checkReaders(t, body, r)
	}
}

func checkReaders(t *testing.T, body string, r *Response) {
	t.Helper()
	if got, want := r.HasMessage(), refHasMessage(body); got != want {
		t.Fatalf("HasMessage(%s) = %v, want %v", body, got, want)
	}
	if got, want := r.NumChoices(), refNumChoices(body); got != want {
		t.Fatalf("NumChoices(%s) = %v, want %v", body, got, want)
	}
	if got, want := r.Usage(), refUsage(body); got != want {
		t.Fatalf("Usage(%s) = %v, want %v", body, got, want)
	}
	for i := -1; i < 3; i++ {
		for _, p := range answerPaths {
			if got, want := r.ChoiceField(i, p), refChoiceField(body, i, p); !reflect.DeepEqual(got, want) {
				t.Fatalf("ChoiceField(%d, %q) of %s = %#v, want %#v", i, p, body, got, want)
			}
		}
		if got, want := r.HasToolCalls(i), refHasToolCalls(body, i); got != want {
			t.Fatalf("HasToolCalls(%d) of %s = %v, want %v", i, body, got, want)
		}
		o, n, ok := r.contentValue(i)
		wo, wn, wok := refContentValue(body, i)
		if o != wo || n != wn || ok != wok {
			t.Fatalf("contentValue(%d) of %s = %d,%d,%v, want %d,%d,%v", i, body, o, n, ok, wo, wn, wok)
		}
		got := r.ChoiceContent(i)
		if want := refChoiceField(body, i, "message.content").String(); got != want {
			t.Fatalf("ChoiceContent(%d) of %s = %q, want %q", i, body, got, want)
		}
		if aliases(got, r.Body) {
			t.Fatalf("ChoiceContent(%d) of %s shares the body's memory", i, body)
		}
	}
}

var answerBodies = []string{
	`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"old \"text\"\n"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function"}]}}]}`,
	`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]}}]}`,
	`{"choices":[{"message":{"function_call":{"name":"f"}}}]}`,
	`{"choices":[{"index":0},{"index":1,"message":{"content":""}}]}`,
	`{}`, `[]`, ``, `null`, `"x"`, `{"choices":[]}`, `{"choices":{"message":{}}}`, `{"choices":{"0":{"message":{"content":"obj"}}}}`,
	`{"choices":[{"index":0,"finish_reason":"stop"}]}`, `{"choices":[{"message":"hi"}]}`, `{"choices":["a",1,null,[{"message":{}}]]}`,
	`{"choices":[{"message":{"content":"a","content":"b"}}]}`,
	`{"choices":[{"message":{"content":"a"},"message":{"content":"b"}}]}`,
	`{"choices":[{"message":"x","message":{"content":"b"}}]}`,
	`{"choices":[{"message":{},"message":{"content":""}}]}`,
	`{"choices":[{"message":{"role":"a"},"message":{"content":"x","tool_calls":[1],"function_call":{}}}]}`,
	`{"choices":[{"message":{"content":"a","tool_calls":[1],"tool_calls":[]}}]}`,
	`{"choices":[{"message":{"content":"a"}}],"choices":[{"message":{"content":"b"}}]}`,
	`{"choices":1,"choices":[{"message":{"content":"b"}}]}`,
	`{"usage":{"total_tokens":1},"usage":{"total_tokens":2}}`,
	`{"usage":"x"}`, `{"usage":null}`, `{"usage":{"total_tokens":"7","prompt_tokens":1.9,"completion_tokens":-2}}`,
	`{"choices":[{"message":{"\u0063ontent":"escaped key","tool_\u0063alls":[1]}}],"\u0075sage":{"total_tokens":4}}`,
	`{"ch\u006fices":[{"message":{"content":"escaped choices"}}]}`,
	`{"choices":[{"message":{"content":["a part",{"text":"t"}]}},{"message":{"content":"second"}}]}`,
	` { "choices" : [ { "message" : { "content" : "spaced" , "role":"assistant" } , "finish_reason" : "length" } ] , "usage" : { "total_tokens" : 9 } } `,
	`{"choices":[{"message":{"content":"unicode \u00e9 \ud83d\ude00 \ud800 lone"}}]}`,
	`{"choices":[{"message":{"content":"bad \xff utf8"}}]}`,
	`{"choices":[{"message":{"content":"unterminated}]}`,
	`{"choices":[{"message":{"content":"trailing",}}]}`,
	`{"choices":[{"message":{"content":"x"}}] "usage":{}}`,
	`{"choices":[{"message":{"content":"x"}}]}garbage`,
	`{"choices":[{"message":{"content":1e400}}]}`,
	`{"choices":[{"message":{"content":-0.5e-3,"tool_calls":{"a":1}}}]}`,
	`{"choices":[{"message":{"content":true,"function_call":[1]}},{"message":{"content":false}}]}`,
	`{"choices":[{"message":{"content":"a \"quoted\" \u4e2d\\ claim"}},{"message":{"content":"plain","content":"twice"}}],"usage":{"total_tokens":1}}`,
	`  {"choices":[{"message":{"content":"deep","tool_calls":[[[[1]]]]}}]}  `, `{"choices":[{"message":{"content":"x"}}]} x`, ` [1] `, `{"a":[[[[[{}]]]]]}`,
	"{\"choices\":[{\"message\":{\"content\":\"raw \x01 control\"}}]}",
	// Contents the check decodes in the same read: escapes of every kind at
	// each place of an eight-byte word, invalid ones, and contents longer than
	// the decoder's first buffer.
	`{"choices":[{"message":{"content":"\u00e9\ud83d\ude00 \ud800 lone\udc00\ud800\u0041 \/\b\f\r\t 1234567\"12345678\n"}}]}`,
	`{"choices":[{"message":{"content":"bad \ud83d\uzzzz"}}]}`, `{"choices":[{"message":{"content":"bad \q escape"}}]}`,
	`{"choices":[{"message":{"content":"1234567\`,
	`{"choices":[{"message":{"content":"` + strings.Repeat(`{\"unitId\": 246, \"claim\": \"中文\"}\n`, 200) + `"},"finish_reason":"stop"}]}`,
	`{"choices":[{"message":{"content":"` + strings.Repeat("plain ", 800) + `\n"},"finish_reason":"stop"}]}`,
	// Usages the walk reads itself, and those it leaves to gjson.
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":512,"completion_tokens":64,"total_tokens":576}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{ "prompt_tokens" : -0 , "completion_tokens":0,"total_tokens":-123456789012345,"x":[1]}}`,
	`{"choices":[],"usage":{"total_tokens":1,"total_tokens":2,"prompt_tokens":3,"prompt_tokens":"4"}}`,
	`{"usage":{"total_tokens":1234567890123456,"prompt_tokens":1}}`, `{"usage":{"total_tokens":1.0}}`,
	`{"usage":{"total_tokens":1e2}}`, `{"usage":{"total_tokens":2E+1,"prompt_tokens":7}}`, `{"usage":{"total_tokens":007}}`,
	`{"usage":{"total_tokens":-}}`, `{"usage":{"total_tokens":- 1}}`, `{"usage":{"total_tokens":12x}}`, `{"usage":{"total_tokens":12`,
	`{"usage":{"total\u005ftokens":5,"prompt_tokens":true,"completion_tokens":null}}`, `{"usage":{"total_tokens":{"a":1}}}`,
	`{"usage":{}}`, `{"usage":{"total_tokens":9}} `, `{"usage":{"total_tokens":9}}]`, `{"usage":{"total_tokens":9,}}`,
}

func TestAnswerSpansAsGjson(t *testing.T) {
	t.Parallel()
	for _, body := range answerBodies {
		checkAnswerReaders(t, body)
	}
}

// The spans follow the body through SetChoiceContent edits.
func TestAnswerSpansAfterEdit(t *testing.T) {
	t.Parallel()
	for _, body := range answerBodies {
		for _, content := range []string{"", "plain", "with \"quotes\"\n", "中文", "bad \xff"} {
			r := &Response{Status: 200, Body: []byte(body)}
			r.HasMessage()
			r.Usage() // as the proxy reads it before the response phases
			if err := r.SetChoiceContent(0, content); err != nil {
				continue
			}
			// The usage read before the edit is the edited body's.
			if got, want := r.Usage(), refUsage(string(r.Body)); got != want {
				t.Fatalf("after SetChoiceContent on %s: Usage = %v, want %v", body, got, want)
			}
			checkReaders(t, string(r.Body), r)
			checkAnswerReaders(t, string(r.Body))
			// and the cached reader of the edited body agrees with a fresh one
			fresh := &Response{Status: 200, Body: r.Body}
			for i := 0; i < 2; i++ {
				if got, want := r.ChoiceContent(i), fresh.ChoiceContent(i); got != want {
					t.Fatalf("after SetChoiceContent on %s: ChoiceContent(%d) = %q, fresh %q", body, i, got, want)
				}
				if !reflect.DeepEqual(r.ChoiceField(i, "message"), refChoiceField(string(r.Body), i, "message")) {
					t.Fatalf("after SetChoiceContent on %s: ChoiceField(%d, message) differs", body, i)
				}
			}
		}
	}
}

func FuzzAnswerSpans(f *testing.F) {
	for _, b := range answerBodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkAnswerReaders(t, body)
	})
}
