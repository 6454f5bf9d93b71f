package interceptors

import "testing"

func TestResponseHasMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       bool
	}{
		{"an answer", `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}`, true},
		{"tool calls without content", `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]}}]}`, true},
		{"the second choice has the message", `{"choices":[{"index":0},{"index":1,"message":{"content":""}}]}`, true},
		{"empty object", `{}`, false},
		{"no choices", `{"choices":[]}`, false},
		{"choices is not an array", `{"choices":{"message":{}}}`, false},
		{"a choice without a message", `{"choices":[{"index":0,"finish_reason":"stop"}]}`, false},
		{"a message that is not an object", `{"choices":[{"message":"hi"}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := (&Response{Status: 200, Body: []byte(tc.body)}).HasMessage(); got != tc.want {
				t.Fatalf("HasMessage(%s) = %v, want %v", tc.body, got, tc.want)
			}
		})
	}
}
