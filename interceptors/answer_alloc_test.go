package interceptors

import "testing"

// Reading an answer, editing its content and reading it again allocates only the
// edited body and the copy of the content read.
func TestAnswerSpansAllocs(t *testing.T) {
	body := []byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"old text"},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`)
	r := &Response{Status: 200, Body: body}
	r.HasMessage() // the first walk allocates the choices' array
	n := testing.AllocsPerRun(100, func() {
		r.Body = body
		_ = r.HasMessage()
		_ = r.NumChoices()
		_ = r.Usage()
		_ = r.ChoiceContentNull(0)
		_ = r.HasToolCalls(0)
		_ = r.SetChoiceContent(0, "new text")
		_ = r.ChoiceContent(0)
		_ = r.Usage()
	})
	if n > 2 {
		t.Fatalf("%v allocations per read-edit-read, want 2 (the edited body, the content read)", n)
	}
}
