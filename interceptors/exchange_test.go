package interceptors

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors/internal/bufpool"
)

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

// SetChoiceContent splices the new content where sjson.SetBytes would, byte for
// byte, and ChoiceContent never returns memory of the body.
func TestResponseSetChoiceContentAsSjson(t *testing.T) {
	t.Parallel()
	bodies := []string{
		`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"old \"text\"\n"},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`,
		`{"choices":[{"message":{"content":null,"role":"assistant"}}]}`,
		`{"choices":[{"message":{"role":"assistant"}}]}`,
		`{"choices":[{"message":{"content":"a","content":"b"}}]}`,
		`{"choices":[{"message":{"\u0063ontent":"escaped key"}}]}`,
		`{"choices":[{"message":{"content":["a part"]}},{"message":{"content":"second"}}]}`,
		`{"choices" : [ { "message" : { "content" : "spaced" } } ] }`,
		`{"choices":[]}`,
		`{}`,
	}
	contents := []string{"", "plain ascii", "with <html> & \"quotes\"\n", "中文 PlayerA 1:24", "bad \xff utf8", "tab\tand \\ backslash",
		// long enough for the encoder's path for valid UTF-8 (and the other one)
		strings.Repeat("中文 <b>&</b> \"x\"\u2028\u2029\t PlayerA 1:24\n", 6), strings.Repeat("答案 ", 30) + "\xe2\x80"}
	for _, body := range bodies {
		for _, content := range contents {
			for _, i := range []int{0, 1} {
				want, werr := sjson.SetBytes([]byte(body), "choices."+strconv.Itoa(i)+".message.content", content)
				r := &Response{Status: 200, Body: []byte(body)}
				r.ChoiceContent(i) // fills the cache, which the edit must not serve again
				err := r.SetChoiceContent(i, content)
				if (err != nil) != (werr != nil) || string(r.Body) != string(want) {
					t.Fatalf("SetChoiceContent(%d, %q) on %s = %s, %v; sjson gives %s, %v", i, content, body, r.Body, err, want, werr)
				}
				if got, want := r.ChoiceContent(i), gjson.GetBytes(r.Body, "choices."+strconv.Itoa(i)+".message.content").String(); got != want {
					t.Fatalf("ChoiceContent(%d) after the edit = %q, want %q", i, got, want)
				}
			}
		}
	}
}

func TestResponseChoiceContentIsACopy(t *testing.T) {
	t.Parallel()
	r := &Response{Status: 200, Body: []byte(`{"choices":[{"message":{"content":"no escapes here"}}]}`)}
	c := r.ChoiceContent(0)
	for i := range r.Body {
		r.Body[i] = 'x' // the buffer reused for another request
	}
	if c != "no escapes here" {
		t.Fatalf("ChoiceContent shares the body's memory: %q", c)
	}
}

// A content that is not a string (an array of parts) is read as its raw JSON: a
// copy too, as a trace keeps it after the body's buffer went back to its pool.
func TestResponseChoiceContentOfPartsIsACopy(t *testing.T) {
	t.Parallel()
	r := &Response{Status: 200, Body: []byte(`{"choices":[{"message":{"content":[{"type":"text","text":"a part"}]}}]}`)}
	c := r.ChoiceContent(0)
	for i := range r.Body {
		r.Body[i] = 'x'
	}
	if c != `[{"type":"text","text":"a part"}]` {
		t.Fatalf("ChoiceContent shares the body's memory: %q", c)
	}
}

func TestResponseChoiceContentNull(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"choices":[{"message":{"content":null}}]}`,
		`{"choices":[{"message":{"content":"x"}}]}`,
		`{"choices":[{"message":{"content":""}}]}`,
		`{"choices":[{"message":{"role":"assistant"}}]}`,
		`{"choices":[{"message":"text"}]}`,
		`{"choices":[{"message":{"content": null }}]}`,
		`{"choices":[{"message":{"content":[]}}]}`,
		`{"choices":[]}`,
	} {
		r := &Response{Status: 200, Body: []byte(body)}
		if got, want := r.ChoiceContentNull(0), gjson.GetBytes(r.Body, "choices.0.message.content").Type == gjson.Null; got != want {
			t.Errorf("ChoiceContentNull on %s = %v, gjson says %v", body, got, want)
		}
	}
}

// TestBufferPooled: a buffer up to the largest size class is the exchange's
// (returned at Release); a larger one is its own.
func TestBufferPooled(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 4097, bufpool.MaxSize} {
		ex := &Exchange{}
		if b := ex.Buffer(n); len(b) != 0 || cap(b) < n || len(ex.buffers) != 1 {
			t.Fatalf("Buffer(%d): len %d cap %d, %d pooled", n, len(b), cap(b), len(ex.buffers))
		}
		ex.Release()
	}
	ex := &Exchange{}
	if b := ex.Buffer(bufpool.MaxSize + 1); cap(b) < bufpool.MaxSize+1 || len(ex.buffers) != 0 {
		t.Fatalf("a buffer beyond the largest class is pooled (cap %d)", cap(b))
	}
}

// TestHoldKeepsBuffers: the buffers go back to the pool with the last release —
// the proxy's or a holder's, in either order — and not before.
func TestHoldKeepsBuffers(t *testing.T) {
	t.Parallel()
	for _, holderLast := range []bool{true, false} {
		ex := &Exchange{}
		b := append(ex.Buffer(10), "client body"...)
		ex.Hold()
		ex.Hold()
		first, second := ex.Release, ex.Release // the proxy's, then a holder's
		if !holderLast {
			first, second = second, first
		}
		first()
		second()
		if len(ex.buffers) != 1 || string(b) != "client body" {
			t.Fatalf("holderLast=%v: released with a hold left (buffers %d, body %q)", holderLast, len(ex.buffers), b)
		}
		ex.Release() // the last holder
		if len(ex.buffers) != 0 {
			t.Fatalf("holderLast=%v: %d buffers kept after the last release", holderLast, len(ex.buffers))
		}
		if bufpool.Poisons && b[0] != bufpool.PoisonByte {
			t.Errorf("a race-enabled build did not poison the released buffer: %q", b)
		}
	}
}

// TestExchangeValues covers SetValue's in-place slots and the map past them:
// replacing a value, more keys than slots, an absent key.
func TestExchangeValues(t *testing.T) {
	type key int
	ex := &Exchange{}
	if v := ex.Value(key(0)); v != nil {
		t.Fatalf("empty exchange: %v", v)
	}
	const n = exchangeValues + 3
	for i := range n {
		ex.SetValue(key(i), i)
	}
	ex.SetValue(key(1), "one")
	ex.SetValue(key(n-1), "last")
	for i := range n {
		want := any(i)
		switch i {
		case 1:
			want = "one"
		case n - 1:
			want = "last"
		}
		if got := ex.Value(key(i)); got != want {
			t.Errorf("Value(%d) = %v, want %v", i, got, want)
		}
	}
	if v := ex.Value(key(n)); v != nil {
		t.Errorf("absent key: %v", v)
	}
	if v := ex.Value("other type"); v != nil {
		t.Errorf("absent key of another type: %v", v)
	}
}

// TestExchangeHeaders: SetHeader replaces, AddHeader appends past the in-place
// slots.
func TestExchangeHeaders(t *testing.T) {
	ex := &Exchange{}
	ex.AddHeader("A", "1")
	ex.SetHeader("B", "2")
	ex.SetHeader("A", "3")
	ex.AddHeader("C", "4")
	ex.AddHeader("D", "5")
	want := [][2]string{{"A", "3"}, {"B", "2"}, {"C", "4"}, {"D", "5"}}
	if !slices.Equal(ex.ResponseHeaders, want) {
		t.Errorf("headers %v, want %v", ex.ResponseHeaders, want)
	}
}

// namedValidator is an AnswerValidator that only has a name.
type namedValidator string

func (v namedValidator) Name() string    { return string(v) }
func (v namedValidator) LLMBacked() bool { return false }
func (v namedValidator) ValidateAnswer(context.Context, *Exchange, string) ([]Issue, error) {
	return nil, nil
}

// TestExchangeAddValidator: validators keep their order past the in-place
// slots, and a validator appended directly (as other stages may) joins them.
func TestExchangeAddValidator(t *testing.T) {
	ex := &Exchange{}
	ex.AddValidator(namedValidator("a"))
	ex.AddValidator(namedValidator("b"))
	ex.Validators = append(ex.Validators, namedValidator("c"))
	ex.AddValidator(namedValidator("d"))
	var names []string
	for _, v := range ex.Validators {
		names = append(names, v.Name())
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(names, want) {
		t.Errorf("validators %v, want %v", names, want)
	}
}

// TestExchangeNewChoices: the choices start zero, even when the in-place slot
// held an earlier answer's, and there are as many as asked for.
func TestExchangeNewChoices(t *testing.T) {
	ex := &Exchange{}
	for _, n := range []int{1, 0, 3, 1} {
		for i := range ex.Choices {
			ex.Choices[i] = Choice{Index: 7, Skipped: "x", Issues: []Issue{{Code: "c"}}}
		}
		got := ex.NewChoices(n)
		if len(got) != n || len(ex.Choices) != n || cap(got) != n {
			t.Fatalf("NewChoices(%d) = %d choices (cap %d), Choices %d", n, len(got), cap(got), len(ex.Choices))
		}
		for i, c := range got {
			if !reflect.ValueOf(c).IsZero() {
				t.Fatalf("NewChoices(%d)[%d] = %+v, want zero", n, i, c)
			}
		}
	}
}

// TestIssueCountsHeader: a clean answer's header is the one built from its
// counts.
func TestIssueCountsHeader(t *testing.T) {
	var zero, some SeverityCounts
	some[Warning], some[Fatal] = 2, 1
	for _, c := range []struct{ draft, final, delivered SeverityCounts }{
		{zero, zero, zero}, {some, zero, zero}, {zero, some, zero}, {zero, zero, some}, {some, some, some},
	} {
		want := "draft=" + c.draft.String() + ";final=" + c.final.String() + ";delivered=" + c.delivered.String()
		if got := IssueCountsHeader(c.draft, c.final, c.delivered); got != want {
			t.Errorf("IssueCountsHeader(%v, %v, %v) = %q, want %q", c.draft, c.final, c.delivered, got, want)
		}
	}
}
