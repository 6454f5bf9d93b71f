package interceptors

import (
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// answerSpans is where the parts of a chat.completion body that the Response's
// readers ask for are, found in one walk of the body and kept until Body changes:
// HasMessage, NumChoices, Usage, ChoiceField and the content readers then cost a
// lookup instead of a gjson.Get each, which skips the (large) message content
// byte by byte again.
//
// The walk serves a body only when it is valid JSON, its root an object with at
// most one "choices" and one "usage" member and "choices" (when present) an
// array: on those bodies gjson's first-match reading and the spans agree. Any other
// body is read with gjson as before (fast is false).
type answerSpans struct {
	body *byte
	n    int
	read bool
	fast bool
	// valid reports a body known to be valid JSON before the walk (an edit of a
	// valid body that kept it valid).
	valid bool

	choicesFound bool
	choices      []choiceSpans
	usage        span
	// usageRead reports that usageValue is the body's Usage: read once, and
	// carried over an edit of the content (SetChoiceContent), which leaves the
	// usage as it was, so that summing usage after the edit walks nothing.
	usageRead  bool
	usageValue Usage
	// one holds the choices of a body with a single choice (the usual answer),
	// so that the walk of it allocates nothing: choices is then one[:1]. Like
	// the heap array of a longer list, it is reused by the walk of an edited body.
	one [1]choiceSpans
}

// span is one JSON value's raw text and its offset in the body; Raw is "" when the
// value is absent.
type span struct {
	raw string
	off int
}

// choiceSpans are the spans of one element of "choices".
type choiceSpans struct {
	span
	// message is the element's first "message" member (an object element only);
	// msgFields reports that message is the only "message" member, an object
	// whose members content, tool_calls and function_call each occur at most
	// once, so that the spans below are what gjson reads.
	message   span
	msgFields bool
	content   span
	toolCalls span
	funcCall  span
}

// MarkValid records that Body, as it is now, is valid JSON within the proxy's
// nesting bound (rawjson.Check passed): the readers' walk of the body then skips
// its own validity check. An edit of Body (a new slice) forgets it.
func (r *Response) MarkValid() {
	if r == nil || len(r.Body) == 0 {
		return
	}
	r.answer = answerSpans{body: unsafe.SliceData(r.Body), n: len(r.Body), valid: true, choices: r.answer.choices[:0]}
}

// spans returns the body's spans, walking the body when it changed since the last
// walk.
func (r *Response) spans() *answerSpans {
	a := &r.answer
	same := a.n == len(r.Body) && a.body == unsafe.SliceData(r.Body) && a.body != nil
	if a.read && same {
		return a
	}
	valid := same && a.valid
	usageRead, usage := same && a.usageRead, a.usageValue
	// The choices' backing array is reused by the walk of an edited body (a
	// Response is not copied by value, so nothing else holds it).
	*a = answerSpans{body: unsafe.SliceData(r.Body), n: len(r.Body), read: true, valid: valid, choices: a.choices[:0],
		usageRead: usageRead, usageValue: usage}
	a.fast = a.walk(r.view())
	return a
}

// walk finds the spans of body; false means the body is left to gjson.
func (a *answerSpans) walk(body string) bool {
	if !a.valid && !rawjson.ValidString(body, rawjson.DefaultMaxDepth) {
		return false
	}
	if cap(a.choices) == 0 {
		a.choices = a.one[:0]
	}
	ok := true
	usageFound := false
	end := rawjson.ScanMembers(body, 0, func(key string, v int) int {
		switch {
		case rawjson.KeyIs(key, "choices"):
			if a.choicesFound || body[v] != '[' {
				ok = false
				return -1
			}
			a.choicesFound = true
			e := a.walkChoices(body, v)
			if e < 0 {
				ok = false
			}
			return e
		case rawjson.KeyIs(key, "usage"):
			if usageFound {
				ok = false
				return -1
			}
			usageFound = true
			e := rawjson.ValueEnd(body, v)
			if e > v {
				a.usage = span{raw: body[v:e], off: v}
			}
			return e
		}
		return -1
	})
	return ok && end >= 0
}

// walkChoices records the elements of the choices array at body[start] and
// returns the offset just past it (-1 on a walk failure). Each byte is read once:
// a choice's end is where its walk ends.
func (a *answerSpans) walkChoices(body string, start int) int {
	ok := true
	end := rawjson.ScanElements(body, start, func(v int) int {
		var c choiceSpans
		e := -1
		if body[v] == '{' {
			e = rawjson.ScanMembers(body, v, func(key string, m int) int {
				if !rawjson.KeyIs(key, "message") {
					return -1
				}
				if c.message.raw != "" {
					// gjson reads a path below "message" on in the next
					// "message" when the first lacks it: leave those to gjson.
					c.msgFields = false
					return -1
				}
				var me int
				if body[m] == '{' {
					me, c.msgFields = c.readMessage(body, m)
				} else {
					me = rawjson.ValueEnd(body, m)
				}
				if me > m {
					c.message = span{raw: body[m:me], off: m}
				}
				return me
			})
		} else {
			e = rawjson.ValueEnd(body, v)
		}
		if e < 0 {
			ok = false
			return -1
		}
		c.span = span{raw: body[v:e], off: v}
		a.choices = append(a.choices, c)
		return e
	})
	if !ok {
		return -1
	}
	return end
}

// readMessage records the content, tool_calls and function_call of the message
// object at body[start] and returns the offset just past it; ok is false when one
// of them occurs twice.
func (c *choiceSpans) readMessage(body string, start int) (end int, ok bool) {
	ok = true
	end = rawjson.ScanMembers(body, start, func(key string, v int) int {
		var s *span
		switch {
		case rawjson.KeyIs(key, "content"):
			s = &c.content
		case rawjson.KeyIs(key, "tool_calls"):
			s = &c.toolCalls
		case rawjson.KeyIs(key, "function_call"):
			s = &c.funcCall
		default:
			return -1
		}
		if s.raw != "" {
			ok = false
			return -1
		}
		e := rawjson.ValueEnd(body, v)
		if e > v {
			*s = span{raw: body[v:e], off: v}
		}
		return e
	})
	return end, ok
}

// choice returns the spans of the choice at position i, or nil.
func (a *answerSpans) choice(i int) *choiceSpans {
	if i < 0 || i >= len(a.choices) {
		return nil
	}
	return &a.choices[i]
}

// result is the gjson.Result gjson.Get gives for the value s of the body.
func (s span) result() gjson.Result {
	if s.raw == "" {
		return gjson.Result{}
	}
	v := gjson.Parse(s.raw)
	v.Index = s.off
	return v
}

// get is gjson.Get(json, path) for a json found at offset off in the body, with
// the Index of the result in the body.
func get(json string, off int, path string) gjson.Result {
	v := gjson.Get(json, path)
	if v.Index > 0 {
		v.Index += off
	}
	for i := range v.Indexes {
		v.Indexes[i] += off
	}
	return v
}

// plainPath reports a path of plain names and indexes (no wildcards, modifiers,
// queries, counts or escapes), which gjson reads the same inside a part of the body.
func plainPath(path string) bool {
	if path == "" {
		return false
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return !strings.HasPrefix(path, ".") && !strings.HasSuffix(path, ".") && !strings.Contains(path, "..")
}
