package reqcontext

import (
	"unsafe"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// Message is one element of a chat completion's messages array, located in the body
// without decoding it. Offsets are byte offsets into the body it was found in.
type Message struct {
	// Role is the message's role ("system", "user", ...), decoded; "" when absent.
	Role string
	// Start and End delimit the element: body[Start:End] is its JSON object.
	Start, End int
	// ContentStart and ContentEnd delimit the raw JSON of the content value (a
	// string, an array of parts, null); both are 0 when the message has no content.
	ContentStart, ContentEnd int
}

// MessageList is the messages array of a chat completion body.
type MessageList struct {
	// Start and End delimit the array: body[Start:End] is "[...]".
	Start, End int
	// Items are the elements in order. Elements that are not objects are listed
	// with an empty Role.
	Items []Message
}

// FindMessages locates the body's messages array and its elements; ok is false when
// the body has no "messages" member or it is not an array. It reads the body once
// with a raw scanner: nothing is copied or unescaped but the roles, so a request
// carrying a long operation log costs a memory scan. The body must be valid JSON
// (the proxy checks it with rawjson.Check before any interceptor runs).
func FindMessages(body []byte) (MessageList, bool) { return findMessages(bytesView(body)) }

func findMessages(s string) (MessageList, bool) {
	r := scanRequest(s, nil, nil)
	return r.messages, r.hasMessages
}

// requestMembers are the top-level members of a chat completion body the context
// stage reads. scanRequest finds them in one walk of the body: looking each up on
// its own skipped over the messages — the operation log — once per lookup.
type requestMembers struct {
	messages    MessageList // as findMessages returns it
	hasMessages bool
	// metadata and responseFormat are the raw JSON of those members ("" when
	// absent), as rawjson.Find returns them: the last one of a repeated name.
	metadata, responseFormat string
	// metadataAt and responseFormatAt are where they start in the body, for
	// reading them from a copy of it (keptScan).
	metadataAt, responseFormatAt int
}

// RequestScan is what the context stage reads of a chat completion body's
// top-level members, found by a walk of the body that comes before the stage —
// the proxy's, which reads the model and the stream options as it admits the
// request (ScanRequest). Handed on with KeepScan, it spares the stage walking the
// body, and the operation log in it, a second time.
type RequestScan struct {
	members requestMembers
	// Identity key: a slice's pointer and length, which pin its array (docs/architecture.md, Lifetimes).
	// body and n name the body the scan is kept for (KeepScan), as
	// scannedMessages does; n is the scanned body's length until then.
	body *byte
	n    int
	// items is the messages' room for most requests (scanMessages).
	items [4]Message
}

// ScanRequest walks the top-level members of body (JSON the proxy has checked
// with rawjson.Check) once: it reads those the context stage needs (messages,
// metadata, response_format, the last of a repeated name counting), and calls
// other, when not nil, with the raw key of every other member and the offset of
// its value in body; other returns the offset where the value ends, or -1 for the
// walk to skip the value itself.
func ScanRequest(body []byte, other func(key string, v int) int) *RequestScan {
	sc := &RequestScan{n: len(body)}
	sc.members = scanRequest(bytesView(body), sc.items[:0], other)
	return sc
}

// KeepScan hands the context stage of ex the scan of its client's body that the
// proxy made before the chain (ScanRequest): of body itself, or of a byte-for-byte
// copy of it — body is then the copy, the exchange's Original. The stage uses it
// when it reads that very slice (no earlier stage replaced the body), and walks
// the body itself otherwise. A scan of another length than body is not kept.
//
// The scan waits in the request context's slot of the exchange, which the stage
// fills with the context: FromExchange does not report it, and a chain without
// the stage leaves it unread.
func KeepScan(ex *interceptors.Exchange, body []byte, sc *RequestScan) {
	if sc == nil || len(body) == 0 || len(body) != sc.n {
		return
	}
	sc.body = unsafe.SliceData(body)
	ex.SetValue(contextKey{}, sc)
}

// keptScan returns the members of body from the scan KeepScan kept in ex for
// that very slice; ok is false when there is none. The raw members are read
// from body, not from the body scanned (the proxy's buffer, of which body is a
// copy).
func keptScan(ex *interceptors.Exchange, body []byte) (requestMembers, bool) {
	sc, ok := ex.Value(contextKey{}).(*RequestScan)
	if !ok || len(body) == 0 || sc.body != unsafe.SliceData(body) || sc.n != len(body) {
		return requestMembers{}, false
	}
	r, s := sc.members, bytesView(body)
	if r.metadata != "" {
		r.metadata = s[r.metadataAt : r.metadataAt+len(r.metadata)]
	}
	if r.responseFormat != "" {
		r.responseFormat = s[r.responseFormatAt : r.responseFormatAt+len(r.responseFormat)]
	}
	return r, true
}

// scanRequest reads the members of the body the context stage needs in one walk,
// and hands the others to other (ScanRequest); the messages' first items go in
// room when it has capacity. The body must be valid JSON (the proxy checks it
// with rawjson.Check before any interceptor runs).
func scanRequest(s string, room []Message, other func(key string, v int) int) requestMembers {
	var r requestMembers
	found := false
	rawjson.ScanMembers(s, 0, func(key string, v int) int {
		switch {
		case rawjson.KeyIs(key, "messages"):
			// With a duplicate name the last one wins (rawjson.Find).
			found = s[v] == '['
			if !found {
				return -1
			}
			r.messages = scanMessages(s, v, room)
			return r.messages.End
		case rawjson.KeyIs(key, "metadata"):
			return memberEnd(s, v, &r.metadata, &r.metadataAt)
		case rawjson.KeyIs(key, "response_format"):
			return memberEnd(s, v, &r.responseFormat, &r.responseFormatAt)
		case other != nil:
			return other(key, v)
		}
		return -1
	})
	r.hasMessages = found && r.messages.End >= 0
	if !r.hasMessages {
		r.messages = MessageList{}
	}
	return r
}

// memberEnd sets *raw to the value at s[v] and *at to v, and returns its end
// (-1, and both untouched, when the value is cut short, as rawjson.Find would
// not report it).
func memberEnd(s string, v int, raw *string, at *int) int {
	end := rawjson.ValueEnd(s, v)
	if end >= 0 {
		*raw, *at = s[v:end], v
	}
	return end
}

// scanMessages walks the messages array at s[v] where it stands, so that the log
// in a content is scanned once (to find its end), not once per level. The items
// go in room while it has capacity (a repeated messages member, whose last one
// counts, reuses it); nil room: a slice of their own.
func scanMessages(s string, v int, room []Message) MessageList {
	ml := MessageList{Start: v}
	ml.End = rawjson.ScanElements(s, v, func(e int) int {
		m := Message{Start: e}
		m.End = rawjson.ScanMembers(s, e, func(key string, v int) int {
			end := rawjson.ValueEnd(s, v)
			switch {
			case end < 0:
			case rawjson.KeyIs(key, "role"):
				if r, ok := rawjson.StringValue(s[v:end]); ok {
					m.Role = internRole(r)
				}
			case rawjson.KeyIs(key, "content"):
				m.ContentStart, m.ContentEnd = v, end
			}
			return end
		})
		if m.End < 0 { // not an object: listed with an empty role
			m = Message{Start: e, End: rawjson.ValueEnd(s, e)}
		}
		if ml.Items == nil {
			// Room for a system message, a user message and a turn or two: one
			// allocation for most requests (none with the caller's room), where
			// growing from one took two or three. An empty array keeps nil Items.
			ml.Items = room[:0:cap(room)]
			if cap(room) == 0 {
				ml.Items = make([]Message, 0, 4)
			}
		}
		ml.Items = append(ml.Items, m)
		return m.End
	})
	return ml
}

// Content returns the raw JSON of m's content in body ("" when it has none).
func (m Message) Content(body []byte) []byte {
	if m.ContentEnd == 0 {
		return nil
	}
	return body[m.ContentStart:m.ContentEnd]
}

// internRole returns the well-known roles as constants, so that Role never aliases
// the body; other roles are copied.
func internRole(r string) string {
	for _, known := range [...]string{"system", "user", "assistant", "developer", "tool", "function"} {
		if r == known {
			return known
		}
	}
	return string([]byte(r))
}
