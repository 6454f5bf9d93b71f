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
	arr, ok := rawjson.Find(s, "messages")
	if !ok || arr.Raw[0] != '[' {
		return MessageList{}, false
	}
	ml := MessageList{Start: arr.Off, End: arr.Off + len(arr.Raw)}
	rawjson.EachElement(arr.Raw, func(el rawjson.Value) bool {
		m := Message{Start: arr.Off + el.Off, End: arr.Off + el.Off + len(el.Raw)}
		rawjson.EachMember(el.Raw, func(v rawjson.Member) bool {
			switch {
			case rawjson.KeyIs(v.Key, "role"):
				if r, ok := rawjson.StringValue(v.Raw); ok {
					m.Role = internRole(r)
				}
			case rawjson.KeyIs(v.Key, "content"):
				m.ContentStart = m.Start + v.Off
				m.ContentEnd = m.ContentStart + len(v.Raw)
			}
			return true
		})
		ml.Items = append(ml.Items, m)
		return true
	})
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
