package reqcontext

import (
	"strings"
	"unicode/utf8"

	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// UserTexts returns the texts of the request's user messages, in order: a string
// content is one text; an array content gives one text per part of type "text".
// Other roles, other part types and non-string texts are skipped. The strings are
// copies: they do not alias body. A body without messages gives nil.
//
// It reads the body with a raw scanner (no decode into structs, no unescaping of
// anything but the texts returned), so interceptors that need the user's text (the
// facts, the context rules) can call it on every request.
func UserTexts(body []byte) []string {
	var out []string
	eachUserText(bytesView(body), func(raw string) bool {
		s, _ := rawjson.StringValue(raw)
		if len(s) > 0 && strings.IndexByte(raw, '\\') < 0 {
			s = strings.Clone(s) // s aliases body
		}
		out = append(out, s)
		return true
	})
	return out
}

// headBounds are how much of each user text the pack's context and apply rules
// read: the first lines lines within the first bytes bytes.
type headBounds struct{ bytes, lines int }

// boundsOf returns the pack's head bounds, a byte-order mark included (the rules
// trim one before cutting).
func boundsOf(pack *knowledge.Pack) headBounds {
	b := headBounds{bytes: pack.Context.MaxBytes, lines: pack.Context.MaxLines}
	if b.bytes <= 0 {
		b.bytes = knowledge.DefaultContextMaxBytes
	}
	if b.lines <= 0 {
		b.lines = knowledge.DefaultContextMaxLines
	}
	b.bytes += len("\uFEFF")
	return b
}

// bufferSource gives the buffers user heads are decoded into: the exchange
// (interceptors.Exchange.Buffer), passed as itself because its method value
// cost an allocation per request; bufFunc for any other function.
type bufferSource interface{ Buffer(n int) []byte }

// bufFunc is a function giving buffers, as a bufferSource; a nil one gives none
// (the heads then allocate their own).
type bufFunc func(n int) []byte

// Buffer implements bufferSource.
func (f bufFunc) Buffer(n int) []byte {
	if f == nil {
		return nil
	}
	return f(n)
}

// userHeads are the heads of a request's user texts as the pack's context and
// apply rules read them (knowledge.TextHeads): each within bounds, decoded from
// the body's JSON string only as far as the rules ask — an operation log's header
// block and first operation are in its first lines, and decoding its first 200
// lines on every request was most of the stage's cost. The heads may alias the
// body, and a text with escapes is decoded into buf.Buffer(n) (a buffer with
// room for n bytes; nil: a new one), so they must not outlive the request phase
// nor the buffer; the rules copy what they keep.
type userHeads struct {
	body   string      // the request body, for ClientMentions
	ml     MessageList // its messages
	bounds headBounds
	buf    bufferSource
	texts  []userHead
	first  [1]userHead // texts' room for the one user text most requests have
}

// userHead is one user text's head, decoded so far.
type userHead struct {
	raw   string // the JSON string's contents, escapes and all
	head  string // decoded so far: a view of dec, or of raw when it needs no decoding
	dec   []byte // the decoding buffer, with room for the whole head
	rest  int    // where decoding goes on in raw; -1: head is all of the head
	lines int    // the line breaks in head
}

// newUserHeads finds the user texts of the body's messages ml (empty: none); it
// decodes nothing yet.
func newUserHeads(body string, ml MessageList, bounds headBounds, buf bufferSource) *userHeads {
	h := &userHeads{}
	h.init(body, ml, bounds, buf)
	return h
}

// init sets h to the user texts of the body's messages ml, as newUserHeads
// finds them: h is where the caller keeps them (the context stage, in the
// request's resolution).
func (h *userHeads) init(body string, ml MessageList, bounds headBounds, buf bufferSource) {
	*h = userHeads{body: body, ml: ml, bounds: bounds, buf: buf}
	h.texts = h.first[:0]
	eachUserTextOf(body, ml, func(raw string) bool {
		inner := raw[1 : len(raw)-1]
		t := userHead{raw: inner}
		if head := inner[:min(len(inner), bounds.bytes)]; strings.IndexByte(head, '\\') < 0 {
			t.head, t.rest = head, -1 // nothing to decode
		}
		h.texts = append(h.texts, t)
		return true
	})
}

// ClientMentions implements knowledge.ClientMentioner: whether the client's own
// messages contain s (clientMentions).
func (h *userHeads) ClientMentions(s string) bool { return clientMentions(h.body, h.ml, s) }

// RoleMentions implements knowledge.RoleMentioner.
func (h *userHeads) RoleMentions(roles []string, s string) bool {
	return mentions(h.body, h.ml, roles, s)
}

// Count implements knowledge.TextHeads.
func (h *userHeads) Count() int { return len(h.texts) }

// Head implements knowledge.TextHeads: text i decoded through its lines-th line
// break at least, within the bounds.
func (h *userHeads) Head(i, lines int) (string, bool) {
	t := &h.texts[i]
	lines = min(lines, h.bounds.lines)
	for t.rest >= 0 && t.lines < lines {
		h.decode(t, lines-t.lines)
	}
	return t.head, t.rest >= 0
}

// decode decodes the next lines lines of t (fewer at the end of the text or of
// the bounds). The buffer has room for the whole head, so the head decoded so far
// stays where it is: the lines the rules have read remain valid.
func (h *userHeads) decode(t *userHead, lines int) {
	if t.dec == nil {
		n := min(len(t.raw), h.bounds.bytes) + utf8.UTFMax // AppendUnescape's room
		if h.buf != nil {
			t.dec = h.buf.Buffer(n)
		}
		if t.dec == nil {
			t.dec = make([]byte, 0, n)
		}
	}
	var rest int
	t.dec, rest = rawjson.AppendUnescapeLinesFrom(t.dec, t.raw[t.rest:], h.bounds.bytes-len(t.dec), lines)
	t.head = bytesView(t.dec)
	if rest < 0 {
		t.rest = -1
		return
	}
	t.rest += rest
	if t.lines += lines; t.lines >= h.bounds.lines {
		t.rest = -1 // the rules read no further
	}
}

// eachUserText calls fn with the raw JSON string of each user text, in order.
func eachUserText(body string, fn func(raw string) bool) {
	if ml, ok := findMessages(body); ok {
		eachUserTextOf(body, ml, fn)
	}
}

// eachUserTextOf is eachUserText on the body's messages ml.
func eachUserTextOf(body string, ml MessageList, fn func(raw string) bool) {
	for _, m := range ml.Items {
		if m.Role != "user" || m.ContentEnd == 0 {
			continue
		}
		content := body[m.ContentStart:m.ContentEnd]
		switch content[0] {
		case '"':
			if !fn(content) {
				return
			}
		case '[':
			more := true
			rawjson.EachElement(content, func(part rawjson.Value) bool {
				var typ, text string
				rawjson.EachMember(part.Raw, func(m rawjson.Member) bool {
					switch {
					case rawjson.KeyIs(m.Key, "type"):
						typ = m.Raw
					case rawjson.KeyIs(m.Key, "text"):
						text = m.Raw
					}
					return true
				})
				if t, _ := rawjson.StringValue(typ); t == "text" && len(text) >= 2 && text[0] == '"' {
					more = fn(text)
				}
				return more
			})
			if !more {
				return
			}
		}
	}
}

// Interface guard.
var _ knowledge.ClientMentioner = (*userHeads)(nil)
