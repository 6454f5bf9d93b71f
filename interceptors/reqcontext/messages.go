package reqcontext

import "github.com/factgate/factgate/knowledge/rawjson"

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
	var ml MessageList
	found := false
	// One read of the body: the messages array is walked where it stands, so the
	// log in a content is scanned once (to find its end), not once per level.
	rawjson.ScanMembers(s, 0, func(key string, v int) int {
		if !rawjson.KeyIs(key, "messages") {
			return -1
		}
		// With a duplicate name the last one wins (rawjson.Find).
		found = s[v] == '['
		if !found {
			return -1
		}
		ml = MessageList{Start: v}
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
			ml.Items = append(ml.Items, m)
			return m.End
		})
		return ml.End
	})
	if !found || ml.End < 0 {
		return MessageList{}, false
	}
	return ml, true
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
