package reqcontext

// The request side of the context stage as it was before the heads were decoded
// on demand: the reference the differential tests and fuzz target compare with.
// Do not optimise this file: it is the specification.

import (
	"strings"
	"unicode/utf8"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// refUserTextHeads is userTextHeads as it was before userHeads: it returns the head of each user text within bounds (at least; the
// rules cut again), decoded: a log's first lines are decoded, not the whole log.
// The strings may alias body, and a text with escapes is decoded into buf(n) (a
// buffer with room for n bytes; nil: a new one), so they must not outlive the
// request phase nor the buffer; knowledge.ExtractContextTexts copies what it
// keeps.
func refUserTextHeads(body string, bounds headBounds, buf func(n int) []byte) []string {
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

// refFactgateMetadata is factgateMetadata as it was before scanRequest: it looks
// the metadata up on its own.
func refFactgateMetadata(body string) []metaItem {
	m, ok := rawjson.Find(body, "metadata")
	if !ok {
		return nil
	}
	var out []metaItem
	rawjson.EachMember(m.Raw, func(v rawjson.Member) bool {
		key := rawjson.Key(v.Key)
		if len(key) >= len(MetadataPrefix) && strings.EqualFold(key[:len(MetadataPrefix)], MetadataPrefix) {
			key = strings.Clone(key)
			out = append(out, metaItem{key: key, name: key[len(MetadataPrefix):], value: v.Raw})
		}
		return true
	})
	return out
}
