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
//
// Identity key: a slice's pointer and length, which pin its array (docs/architecture.md, Lifetimes).
type answerSpans struct {
	body *byte
	n    int
	read bool
	fast bool
	// valid reports a body known to be valid JSON: marked so (MarkValid),
	// checked in the walk (CheckJSON), or an edit of a valid body that kept it
	// valid. The walk of a body not known to be valid checks it as it goes.
	valid bool

	choicesFound bool
	choices      []choiceSpans
	usage        span
	// usageWalked reports that the walk read the usage object's token counts
	// (readUsage): walkedUsage is then the body's Usage if the body is valid.
	usageWalked bool
	walkedUsage Usage
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
	// text is content's decoded text when decoded (CheckJSON decodes a string
	// content on its way): a slice of the body when it has no escapes.
	text    string
	decoded bool
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
	if a.fast && a.usageWalked && !a.usageRead {
		a.usageRead, a.usageValue = true, a.walkedUsage
	}
	return a
}

// CheckJSON reports whether Body is valid JSON nested at most maxDepth levels
// deep (rawjson.Check's verdict; maxDepth < 1 means rawjson.DefaultMaxDepth), and
// reads the answer in the same pass: a valid body is then known to be valid, as
// after MarkValid, and its spans and each choice's content are read, so that
// neither the readers nor ChoiceContent read it again. It says nothing of why a
// body is not valid (rawjson.Check does).
func (r *Response) CheckJSON(maxDepth int) bool {
	a := &r.answer
	body := r.view()
	*a = answerSpans{body: unsafe.SliceData(r.Body), n: len(r.Body), read: true, choices: a.choices[:0]}
	fast, valid := a.checkWalk(body, maxDepth, true)
	if !valid {
		*a = answerSpans{choices: a.choices[:0]}
		return false
	}
	a.valid, a.fast = true, fast
	if a.usageWalked && fast {
		a.usageRead, a.usageValue = true, a.walkedUsage
	}
	return true
}

// walk finds the spans of body; false means the body is left to gjson. A body
// not known to be valid is checked in the same read.
func (a *answerSpans) walk(body string) bool {
	if a.valid {
		fast, _ := walkBody(a, body, &bodyScan{s: body})
		return fast
	}
	fast, valid := a.checkWalk(body, rawjson.DefaultMaxDepth, false)
	return fast && valid
}

// checkWalk walks body with a rawjson.Walker, which checks it as it goes; valid
// is its verdict on the whole body (nested at most maxDepth levels deep). decode
// has the choices' string contents decoded on the way.
func (a *answerSpans) checkWalk(body string, maxDepth int, decode bool) (fast, valid bool) {
	i := 0
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
		i++
	}
	sc := &bodyScan{s: body, w: rawjson.NewWalker(body, maxDepth), walker: true, decode: decode}
	end := -1
	if i < len(body) && body[i] == '{' {
		fast, end = walkBody(a, body, sc)
	} else {
		end = sc.w.Value(i) // not an object: no spans, only the check
	}
	return fast, !sc.w.Failed() && sc.w.End(end)
}

// bodyScan is how a walk reads the body: with w, a rawjson.Walker that checks it
// as it goes (walker), or with rawjson's scanners, over a body known to be valid
// JSON. decode has the walker decode string contents on the way.
type bodyScan struct {
	s      string
	w      rawjson.Walker
	walker bool
	decode bool
}

func (b *bodyScan) members(i int, fn func(key string, value int) int) int {
	if b.walker {
		return b.w.Members(i, fn)
	}
	return rawjson.ScanMembers(b.s, i, fn)
}

func (b *bodyScan) elements(i int, fn func(value int) int) int {
	if b.walker {
		return b.w.Elements(i, fn)
	}
	return rawjson.ScanElements(b.s, i, fn)
}

func (b *bodyScan) value(i int) int {
	if b.walker {
		return b.w.Value(i)
	}
	return rawjson.ValueEnd(b.s, i)
}

// keyIs reports whether a key as members hands it spells name: the walker
// decodes keys, rawjson.ScanMembers hands them raw.
func (b *bodyScan) keyIs(key, name string) bool {
	if b.walker {
		return key == name
	}
	return rawjson.KeyIs(key, name)
}

// content reads a message's content at i: the offset just past it, and, when
// decoded, its text as rawjson.StringValue decodes it (a slice of the body when
// it has no escapes).
func (b *bodyScan) content(i int) (end int, text string, decoded bool) {
	if b.decode && i < len(b.s) && b.s[i] == '"' {
		text, end = b.w.String(i)
		return end, text, end >= 0
	}
	return b.value(i), "", false
}

// walkBody walks the object body with sc, recording the spans; fast is false when
// the body is left to gjson, and end is the offset just past the object (-1 on a
// walk failure).
func walkBody(a *answerSpans, body string, sc *bodyScan) (fast bool, end int) {
	if cap(a.choices) == 0 {
		a.choices = a.one[:0]
	}
	ok := true
	usageFound := false
	end = sc.members(0, func(key string, v int) int {
		switch {
		case sc.keyIs(key, "choices"):
			if a.choicesFound || body[v] != '[' {
				ok = false
				return -1
			}
			a.choicesFound = true
			e := walkChoices(a, body, v, sc)
			if e < 0 {
				ok = false
			}
			return e
		case sc.keyIs(key, "usage"):
			if usageFound {
				ok = false
				return -1
			}
			usageFound = true
			var e int
			if body[v] == '{' {
				e = readUsage(a, body, v, sc)
			} else {
				e = sc.value(v)
			}
			if e > v {
				a.usage = span{raw: body[v:e], off: v}
			}
			return e
		}
		return -1
	})
	return ok && end >= 0, end
}

// readUsage reads the usage object at body[start] in the walk and returns the
// offset just past it. When each of its token counts is absent or a plain
// integer (at most 15 digits, which a float64 holds exactly), the usage is
// what parseUsage reads with gjson (the first of a repeated member), and it is
// kept as the walk's usage (usageWalked) for Usage to take once the body is
// known to be valid; any other count leaves it to parseUsage.
func readUsage(a *answerSpans, body string, start int, sc *bodyScan) int {
	var u Usage
	var seen [3]bool
	plain := true
	end := sc.members(start, func(key string, v int) int {
		var n *int
		var at int
		switch {
		case sc.keyIs(key, "prompt_tokens"):
			n, at = &u.PromptTokens, 0
		case sc.keyIs(key, "completion_tokens"):
			n, at = &u.CompletionTokens, 1
		case sc.keyIs(key, "total_tokens"):
			n, at = &u.TotalTokens, 2
		default:
			return -1
		}
		if seen[at] {
			return -1
		}
		seen[at] = true
		x, e := plainInt(body, v)
		if e < 0 {
			plain = false
			return -1
		}
		*n = x
		return e
	})
	if plain && end >= 0 {
		a.usageWalked, a.walkedUsage = true, u
	}
	return end
}

// plainInt reads the JSON integer at s[i] when it is plain: an optional minus
// and 1 to 15 digits, without a leading zero, not followed by a fraction or an
// exponent. It returns its value and the offset just past it, or -1 for any
// other text. A walker's check of what follows (a separator or the object's
// end) is then the check of the number: the text after a plain integer is
// valid exactly when it is after the number it starts.
func plainInt(s string, i int) (int, int) {
	neg := i < len(s) && s[i] == '-'
	if neg {
		i++
	}
	j, n := i, 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		n = n*10 + int(s[j]-'0')
		j++
	}
	if j == i || j-i > 15 || s[i] == '0' && j-i > 1 {
		return 0, -1
	}
	if j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
		return 0, -1
	}
	if neg {
		n = -n
	}
	return n, j
}

// walkChoices records the elements of the choices array at body[start] and
// returns the offset just past it (-1 on a walk failure). Each byte is read once:
// a choice's end is where its walk ends.
func walkChoices(a *answerSpans, body string, start int, sc *bodyScan) int {
	ok := true
	end := sc.elements(start, func(v int) int {
		var c choiceSpans
		e := -1
		if body[v] == '{' {
			e = sc.members(v, func(key string, m int) int {
				if !sc.keyIs(key, "message") {
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
					me, c.msgFields = readMessage(&c, body, m, sc)
				} else {
					me = sc.value(m)
				}
				if me > m {
					c.message = span{raw: body[m:me], off: m}
				}
				return me
			})
		} else {
			e = sc.value(v)
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
func readMessage(c *choiceSpans, body string, start int, sc *bodyScan) (end int, ok bool) {
	ok = true
	end = sc.members(start, func(key string, v int) int {
		var s *span
		switch {
		case sc.keyIs(key, "content"):
			s = &c.content
		case sc.keyIs(key, "tool_calls"):
			s = &c.toolCalls
		case sc.keyIs(key, "function_call"):
			s = &c.funcCall
		default:
			return -1
		}
		if s.raw != "" {
			ok = false
			return -1
		}
		var e int
		if s == &c.content {
			e, c.text, c.decoded = sc.content(v)
		} else {
			e = sc.value(v)
		}
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
