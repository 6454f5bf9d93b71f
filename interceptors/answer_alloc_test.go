package interceptors

import "testing"

// BenchmarkAnswerSpans reports what reading an answer, editing its content and
// reading it again allocates (the edited body and the copy of the content read),
// and what the first walk of a one-choice answer allocates (nothing: its choice
// is kept in the Response itself).
func BenchmarkAnswerSpans(b *testing.B) {
	body := []byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"old text"},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`)
	b.Run("read-edit-read", func(b *testing.B) {
		r := &Response{Status: 200, Body: body}
		r.HasMessage() // the first walk allocates the choices' array
		b.ReportAllocs()
		for b.Loop() {
			r.Body = body
			_ = r.HasMessage()
			_ = r.NumChoices()
			_ = r.Usage()
			_ = r.ChoiceContentNull(0)
			_ = r.HasToolCalls(0)
			_ = r.SetChoiceContent(0, "new text")
			_ = r.ChoiceContent(0)
			_ = r.Usage()
		}
	})
	b.Run("first-walk-one-choice", func(b *testing.B) {
		r := &Response{}
		b.ReportAllocs()
		for b.Loop() {
			*r = Response{Status: 200, Body: body} // a new Response, as for each upstream call
			if !r.HasMessage() || r.NumChoices() != 1 || r.Usage().TotalTokens != 3 {
				b.Fatal("misread the answer")
			}
		}
	})
}

// The choice a one-choice answer keeps in the Response itself is not mixed up
// with the choices of a two-choice answer read before through the same Response.
func TestAnswerSpansOneChoiceAfterTwo(t *testing.T) {
	body := []byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"text"},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`)
	r := &Response{Status: 200, Body: body}
	if !r.HasMessage() || r.NumChoices() != 1 || r.Usage().TotalTokens != 3 {
		t.Fatal("misread the answer")
	}
	two := []byte(`{"choices":[{"message":{"content":"a"}},{"message":{"content":"b"}}]}`)
	r = &Response{Status: 200, Body: two}
	if r.NumChoices() != 2 || r.ChoiceContent(1) != "b" || r.ChoiceContent(0) != "a" {
		t.Fatal("misread a two-choice answer")
	}
	r.Body = body
	if r.NumChoices() != 1 || r.ChoiceContent(0) != "text" {
		t.Fatal("misread a one-choice answer after a two-choice one")
	}
}

// The usage of an answer whose content was replaced is the one read before the
// edit: summing usage for the delivered body (the proxy's finalBody) does not
// walk the edited body again.
func TestUsageKeptOverContentEdit(t *testing.T) {
	body := []byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"old text"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	r := &Response{Status: 200, Body: body}
	r.MarkValid()
	if !r.HasMessage() || r.Usage().TotalTokens != 3 {
		t.Fatal("misread the answer")
	}
	if err := r.SetChoiceContent(0, "new text"); err != nil {
		t.Fatal(err)
	}
	if u := r.Usage(); u != (Usage{1, 2, 3}) {
		t.Fatalf("usage after the edit %v, want {1 2 3}", u)
	}
	if r.answer.read {
		t.Fatal("reading the usage after the edit walked the edited body")
	}
}
