package interceptors

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/factgate/factgate/configs/units"
)

// A trace is encoded once per request, when it is saved. encoding/json's
// reflection made that a noticeable share of the proxy's CPU, so the trace writes
// itself: AppendJSON below produces, byte for byte, what json.Marshal produces
// for the same value — the same member order, omitempty rules, null for a nil
// slice or map that is not omitempty, sorted map keys, HTML-safe string escapes,
// milliseconds as encoding/json formats a float64, and the same error for a
// Started time that RFC 3339 cannot represent. trace_json_test.go checks this
// against encoding/json on random traces that fill every exported field, so a
// field added to any of these types fails the test until it is written here.

// AppendJSON appends the trace's JSON encoding to dst, under the trace's lock,
// and returns the extended buffer. The encoding is the one json.Marshal gives for
// the trace's fields. It fails only when Started cannot be written as RFC 3339
// (a year outside [0,9999], a zone offset of 24 hours or more), with the error
// json.Marshal returns; dst is then returned as it was.
func (t *Trace) AppendJSON(dst []byte) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, err := t.appendJSON(dst)
	if err != nil {
		return dst, err
	}
	return b, nil
}

// MarshalJSON renders the trace under its lock (AppendJSON). The result is a
// slice of its own, sized to the encoding as json.Marshal's is, since a cache
// keeps it as it is; the encoding is written in a reused scratch buffer first.
func (t *Trace) MarshalJSON() ([]byte, error) {
	scratch := traceScratch.get()
	if scratch == nil {
		scratch = new([]byte)
	}
	b, err := t.AppendJSON((*scratch)[:0])
	var out []byte
	if err == nil {
		out = append([]byte(nil), b...)
	}
	if cap(b) <= maxTraceScratchBytes {
		*scratch = b[:0]
		traceScratch.putUpTo(scratch, maxTraceScratch)
	}
	return out, err
}

// traceScratch keeps free scratch buffers for MarshalJSON, each grown to the
// largest trace it held: at most maxTraceScratch of them, of at most
// maxTraceScratchBytes each (1 MiB in all, part of the runtime allowance beside
// the body buffers' 8 MiB). A larger trace's buffer is left to the garbage
// collector.
var traceScratch freeList

const (
	maxTraceScratch      = 4
	maxTraceScratchBytes = 256 << 10
)

// appendJSON writes the trace's members in their declaration order.
func (t *Trace) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	b = appendStringMember(b, "id", t.ID)
	b = appendStringMember(b, "route", t.Route)
	b = appendOptionalString(b, "variant", t.Variant)
	b = appendKey(b, "started")
	b, err := appendTime(b, t.Started)
	if err != nil {
		return nil, err
	}
	b = appendOptionalString(b, "owner", t.Owner)
	b = appendOptionalString(b, "knowledge_set", t.KnowledgeSet)
	if len(t.Scopes) > 0 {
		b = appendKey(b, "scopes")
		b = appendScopes(b, t.Scopes)
	}
	b = appendOptionalString(b, "session", t.Session)
	b = appendOptionalString(b, "fact_key", t.FactKey)
	b = appendOptionalArray(b, "attempts", t.Attempts, appendAttempt)
	b = appendOptionalArray(b, "calls", t.Calls, appendCall)
	b = appendOptionalString(b, "upstream", t.Upstream)
	b = appendOptionalArray(b, "upstream_attempts", t.UpstreamAttempts, appendUpstreamAttempt)
	if t.Final != nil {
		b = appendKey(b, "final")
		b = appendFinalOutcome(b, t.Final)
	}
	b = appendOptionalArray(b, "choices", t.Choices, appendFinalOutcome)
	b = appendOptionalArray(b, "downgrades", t.Downgrades, appendDowngrade)
	if t.Notice != nil {
		b = appendKey(b, "notice")
		b = appendNotice(b, t.Notice)
	}
	b = appendOptionalBool(b, "validation_incomplete", t.ValidationIncomplete)
	if len(t.Timings) > 0 {
		b = appendKey(b, "timings")
		b = appendTimings(b, t.Timings)
	}
	b = appendKey(b, "usage")
	b = appendUsage(b, &t.Usage)
	b = appendOptionalStrings(b, "notes", t.Notes)
	b = appendOptionalString(b, "client_key", t.ClientKey)
	if t.Request != nil {
		b = appendKey(b, "request")
		b = appendTraceRequest(b, t.Request)
	}
	return append(b, '}'), nil
}

func appendTraceRequest(b []byte, r *TraceRequest) []byte {
	b = append(b, '{')
	b = appendOptionalString(b, "model", r.Model)
	b = appendOptionalBool(b, "stream", r.Stream)
	b = appendKey(b, "messages")
	b = appendArray(b, r.Messages, appendTraceMessage)
	return append(b, '}')
}

func appendTraceMessage(b []byte, m *TraceMessage) []byte {
	b = append(b, '{')
	b = appendStringMember(b, "role", m.Role)
	b = appendStringMember(b, "content", m.Content)
	b = appendIntMember(b, "bytes", m.Bytes)
	b = appendOptionalBool(b, "truncated", m.Truncated)
	return append(b, '}')
}

func appendAttempt(b []byte, a *Attempt) []byte {
	b = append(b, '{')
	b = appendStringMember(b, "kind", a.Kind)
	b = appendIntMember(b, "choice", a.Choice)
	b = appendKey(b, "issues")
	b = appendArray(b, a.Issues, appendIssue)
	b = appendStringMember(b, "counts", a.Counts)
	b = appendIntMember(b, "request_bytes", a.RequestBytes)
	b = appendKey(b, "duration")
	b = appendMillis(b, a.Duration)
	b = appendKey(b, "usage")
	b = appendUsage(b, &a.Usage)
	b = appendOptionalString(b, "error", a.Error)
	b = appendOptionalBool(b, "leaked", a.Leaked)
	b = appendOptionalString(b, "content", a.Content)
	return append(b, '}')
}

func appendIssue(b []byte, is *Issue) []byte {
	b = append(b, '{')
	b = appendStringMember(b, "code", is.Code)
	b = appendKey(b, "severity")
	b = appendString(b, is.Severity.String()) // its MarshalText
	b = appendStringMember(b, "path", is.Path)
	b = appendStringMember(b, "message", is.Message)
	b = appendKey(b, "recommendation")
	b = appendRecommendation(b, &is.Recommendation)
	b = appendOptionalArray(b, "facts", is.Facts, appendFactLine)
	b = appendOptionalString(b, "validator", is.Validator)
	if len(is.Args) > 0 {
		b = appendKey(b, "args")
		b = appendArgs(b, is.Args)
	}
	return append(b, '}')
}

func appendRecommendation(b []byte, r *Recommendation) []byte {
	b = append(b, '{')
	b = appendOptionalString(b, "evidenceLevel", r.EvidenceLevel)
	b = appendOptionalStrings(b, "alternatives", r.Alternatives)
	b = appendOptionalString(b, "player", r.Player)
	b = appendOptionalBool(b, "remove", r.Remove)
	b = appendOptionalString(b, "text", r.Text)
	return append(b, '}')
}

func appendFactLine(b []byte, f *FactLine) []byte {
	b = append(b, '{')
	b = appendKey(b, "at")
	b = strconv.AppendInt(b, int64(f.At), 10) // a time.Duration is its nanoseconds
	b = appendStringMember(b, "text", f.Text)
	return append(b, '}')
}

func appendCall(b []byte, c *Call) []byte {
	b = append(b, '{')
	b = appendStringMember(b, "kind", c.Kind)
	b = appendStringMember(b, "validator", c.Validator)
	b = appendStringMember(b, "result", c.Result)
	b = appendKey(b, "duration")
	b = appendMillis(b, c.Duration)
	b = appendKey(b, "usage")
	b = appendUsage(b, &c.Usage)
	b = appendOptionalString(b, "error", c.Error)
	return append(b, '}')
}

func appendUpstreamAttempt(b []byte, a *UpstreamAttempt) []byte {
	b = append(b, '{')
	b = appendStringMember(b, "upstream", a.Upstream)
	b = appendOptionalString(b, "key", a.Key)
	if a.Status != 0 {
		b = appendKey(b, "status")
		b = strconv.AppendInt(b, int64(a.Status), 10)
	}
	b = appendStringMember(b, "outcome", a.Outcome)
	b = appendOptionalString(b, "error", a.Error)
	if a.Wait != 0 {
		b = appendKey(b, "wait")
		b = appendMillis(b, a.Wait)
	}
	b = appendKey(b, "duration")
	b = appendMillis(b, a.Duration)
	return append(b, '}')
}

func appendFinalOutcome(b []byte, f *FinalOutcome) []byte {
	b = append(b, '{')
	b = appendIntMember(b, "choice", f.Choice)
	b = appendIntMember(b, "attempt", f.Attempt)
	b = appendStringMember(b, "outcome", f.Outcome)
	b = appendStringMember(b, "counts", f.Counts)
	b = appendOptionalString(b, "delivered", f.Delivered)
	if f.Notice != nil {
		b = appendKey(b, "notice")
		b = appendNotice(b, f.Notice)
	}
	return append(b, '}')
}

func appendDowngrade(b []byte, d *Downgrade) []byte {
	b = append(b, '{')
	b = appendIntMember(b, "choice", d.Choice)
	b = appendStringMember(b, "path", d.Path)
	b = appendStringMember(b, "from", d.From)
	b = appendStringMember(b, "to", d.To)
	b = appendOptionalStrings(b, "alternatives", d.Alternatives)
	b = appendOptionalStrings(b, "removed_evidence", d.RemovedEvidence)
	b = appendOptionalStrings(b, "needs_confirmation", d.NeedsConfirmation)
	b = appendOptionalString(b, "player", d.Player)
	b = appendOptionalBool(b, "removed", d.Removed)
	return append(b, '}')
}

func appendNotice(b []byte, n *Notice) []byte {
	b = append(b, '{')
	b = appendIntMember(b, "choice", n.Choice)
	b = appendStringMember(b, "mode", n.Mode)
	b = appendStringMember(b, "text", n.Text)
	b = appendKey(b, "issues")
	b = appendArray(b, n.Issues, appendNoticeIssue)
	return append(b, '}')
}

func appendNoticeIssue(b []byte, is *NoticeIssue) []byte {
	b = append(b, '{')
	b = appendStringMember(b, "code", is.Code)
	b = appendKey(b, "severity")
	b = appendString(b, is.Severity.String()) // its MarshalText
	b = appendStringMember(b, "path", is.Path)
	return append(b, '}')
}

func appendUsage(b []byte, u *Usage) []byte {
	b = append(b, '{')
	b = appendIntMember(b, "prompt_tokens", u.PromptTokens)
	b = appendIntMember(b, "completion_tokens", u.CompletionTokens)
	b = appendIntMember(b, "total_tokens", u.TotalTokens)
	return append(b, '}')
}

// appendScopes writes the request's scopes, keys sorted; a nil list is null.
func appendScopes(b []byte, scopes map[string][]string) []byte {
	var room [8]string
	b = append(b, '{')
	for _, k := range sortedKeys(scopes, room[:0]) {
		b = appendKey(b, k)
		b = appendStrings(b, scopes[k])
	}
	return append(b, '}')
}

// appendTimings writes the named durations, keys sorted.
func appendTimings(b []byte, timings map[string]units.Millis) []byte {
	var room [8]string
	b = append(b, '{')
	for _, k := range sortedKeys(timings, room[:0]) {
		b = appendKey(b, k)
		b = appendMillis(b, timings[k])
	}
	return append(b, '}')
}

// appendArgs writes an issue's template values, keys sorted.
func appendArgs(b []byte, args map[string]string) []byte {
	var room [8]string
	b = append(b, '{')
	for _, k := range sortedKeys(args, room[:0]) {
		b = appendKey(b, k)
		b = appendString(b, args[k])
	}
	return append(b, '}')
}

// sortedKeys appends m's keys to room and sorts them, as encoding/json orders a
// map's members (by the key's bytes).
func sortedKeys[V any](m map[string]V, room []string) []string {
	for k := range m {
		room = append(room, k)
	}
	slices.Sort(room)
	return room
}

// appendKey writes a member's name and colon, after a comma unless the member is
// the object's first. A value never ends in '{', so a '{' before the name is the
// object's own. name is one of the types' JSON names or a map key.
func appendKey(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = appendString(b, name)
	return append(b, ':')
}

// appendStringMember writes a string member.
func appendStringMember(b []byte, name, s string) []byte {
	return appendString(appendKey(b, name), s)
}

// appendIntMember writes an integer member.
func appendIntMember(b []byte, name string, v int) []byte {
	return strconv.AppendInt(appendKey(b, name), int64(v), 10)
}

// appendOptionalString writes a string member tagged omitempty: none when s is "".
func appendOptionalString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendStringMember(b, name, s)
}

// appendOptionalBool writes a bool member tagged omitempty: none when v is false.
func appendOptionalBool(b []byte, name string, v bool) []byte {
	if !v {
		return b
	}
	b = appendKey(b, name)
	return append(b, "true"...)
}

// appendOptionalStrings writes a []string member tagged omitempty: none when the
// list is nil or empty.
func appendOptionalStrings(b []byte, name string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	b = appendKey(b, name)
	return appendStrings(b, list)
}

// appendStrings writes a list of strings; nil is null.
func appendStrings(b []byte, list []string) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendOptionalArray writes a slice member tagged omitempty: none when the slice
// is nil or empty.
func appendOptionalArray[T any](b []byte, name string, items []T, each func([]byte, *T) []byte) []byte {
	if len(items) == 0 {
		return b
	}
	b = appendKey(b, name)
	return appendArray(b, items, each)
}

// appendArray writes items with each; nil is null, as encoding/json writes a nil
// slice.
func appendArray[T any](b []byte, items []T, each func([]byte, *T) []byte) []byte {
	if items == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = each(b, &items[i])
	}
	return append(b, ']')
}

// appendTime writes t as time.Time.MarshalJSON does (RFC 3339 with nanoseconds).
// When t has no RFC 3339 form, it returns the error json.Marshal returns for it.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b) // the same text as MarshalJSON, without its allocation
	if err != nil {
		_, err = json.Marshal(t) // the *json.MarshalerError encoding/json gives
		return nil, err
	}
	return append(b, '"'), nil
}

// appendMillis writes d as units.Millis.MarshalJSON does: its milliseconds as a
// float64.
func appendMillis(b []byte, d units.Millis) []byte {
	return appendFloat64(b, float64(d)/float64(time.Millisecond))
}

// appendFloat64 writes a finite f as encoding/json does: like strconv's shortest
// form, in exponent form only below 1e-6 or from 1e21 on, with the exponent
// unpadded ("1e-7", not "1e-07"). A duration's milliseconds are always finite.
func appendFloat64(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// jsonHex are the digits of a \u escape.
const jsonHex = "0123456789abcdef"

// appendString writes s as a JSON string exactly as encoding/json does with its
// default HTML escaping: '"' and '\' escaped; \b, \f, \n, \r, \t by name; other
// control characters and '<', '>', '&' as \u00XX; U+2028 and U+2029 as \u2028 and
// \u2029; each byte that is not UTF-8 as \ufffd. (rawjson.AppendString leaves the
// HTML characters alone and writes \b and \f as \u00XX, so it cannot stand in.)
func appendString(b []byte, s string) []byte {
	if len(s) >= validFirstFrom && utf8.ValidString(s) {
		return appendValidString(b, s)
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscapedASCII(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', jsonHex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// A string of at least validFirstFrom bytes is checked for UTF-8 first
// (utf8.ValidString, which is fast on text that is mostly one script): a valid one
// is then written without decoding its characters. A trace's long strings are an
// answer's draft and the client's messages, often CJK, where decoding each
// character took most of the trace's encoding.
const validFirstFrom = 64

// appendValidString is appendString for valid UTF-8: every byte stands for itself
// but the ASCII bytes htmlSafe refuses and the E2 80 A8/A9 of U+2028 and U+2029.
func appendValidString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !stringSpecial[c] {
			continue
		}
		if c == 0xE2 {
			// A valid string holds two more bytes after a three-byte lead.
			if s[i+1] != 0x80 || (s[i+2] != 0xA8 && s[i+2] != 0xA9) {
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', jsonHex[s[i+2]&0xf])
			i += 2
			start = i + 1
			continue
		}
		b = append(b, s[start:i]...)
		b = appendEscapedASCII(b, c)
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// stringSpecial marks the bytes appendValidString stops at: the ASCII bytes
// htmlSafe refuses and 0xE2, the lead byte of U+2028 and U+2029.
var stringSpecial = func() (special [256]bool) {
	for c := range utf8.RuneSelf {
		special[c] = !htmlSafe[c]
	}
	special[0xE2] = true
	return special
}()

// htmlSafe holds, for each ASCII byte, whether it stands for itself in a JSON
// string that is safe in HTML: all but the control characters, '"', '\\', '<',
// '>' and '&' (encoding/json's htmlSafeSet).
var htmlSafe = func() (safe [utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		safe[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return safe
}()

// appendEscapedASCII writes the escape of an ASCII byte htmlSafe refuses.
func appendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xf])
}
