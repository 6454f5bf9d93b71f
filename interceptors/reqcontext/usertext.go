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

// userTextHeads returns the head of each user text within bounds (at least; the
// rules cut again), decoded: a log's first lines are decoded, not the whole log.
// The strings may alias body, and a text with escapes is decoded into buf(n) (a
// buffer with room for n bytes; nil: a new one), so they must not outlive the
// request phase nor the buffer; knowledge.ExtractContextTexts copies what it
// keeps.
func userTextHeads(body string, bounds headBounds, buf func(n int) []byte) []string {
	limit := bounds.bytes
	var out []string
	eachUserText(body, func(raw string) bool {
		inner := raw[1 : len(raw)-1]
		head := inner
		if len(head) > limit {
			head = head[:limit]
		}
		if strings.IndexByte(head, '\\') < 0 {
			out = append(out, head)
			return true
		}
		n := len(head) + utf8.UTFMax // AppendUnescape's room
		var b []byte
		if buf != nil {
			b = buf(n)
		} else {
			b = make([]byte, 0, n)
		}
		b = rawjson.AppendUnescapeLines(b, inner, limit, bounds.lines)
		out = append(out, bytesView(b))
		return true
	})
	return out
}

// eachUserText calls fn with the raw JSON string of each user text, in order.
func eachUserText(body string, fn func(raw string) bool) {
	ml, ok := findMessages(body)
	if !ok {
		return
	}
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
