package interceptors

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors/internal/bufpool"
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
// json.Marshal returns; dst is then returned as it was. Like append, it writes in
// dst's spare capacity; it may also leave a few bytes of scratch there past the
// end of what it returns.
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
	scratch := traceScratch.Get()
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
		traceScratch.PutUpTo(scratch, maxTraceScratch)
	}
	return out, err
}

// traceScratch keeps free scratch buffers for MarshalJSON, each grown to the
// largest trace it held: at most maxTraceScratch of them, of at most
// maxTraceScratchBytes each (1 MiB in all, part of the runtime allowance beside
// the body buffers' 8 MiB). A larger trace's buffer is left to the garbage
// collector.
var traceScratch bufpool.List

const (
	maxTraceScratch      = 4
	maxTraceScratchBytes = 256 << 10
)

// appendJSON writes the trace's members in their declaration order.
func (t *Trace) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	b = appendStringMember(b, "id", t.ID)
	b = appendOptionalString(b, "traceparent", t.TraceParent)
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
	b = appendStringMember(b, "heading", is.Heading)
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
		b = appendMapKey(b, k)
		b = appendStrings(b, scopes[k])
	}
	return append(b, '}')
}

// appendTimings writes the named durations, keys sorted.
func appendTimings(b []byte, timings map[string]units.Millis) []byte {
	var room [8]string
	b = append(b, '{')
	for _, k := range sortedKeys(timings, room[:0]) {
		b = appendMapKey(b, k)
		b = appendMillis(b, timings[k])
	}
	return append(b, '}')
}

// appendArgs writes an issue's template values, keys sorted.
func appendArgs(b []byte, args map[string]string) []byte {
	var room [8]string
	b = append(b, '{')
	for _, k := range sortedKeys(args, room[:0]) {
		b = appendMapKey(b, k)
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
// object's own. name is one of the types' JSON names, which need no escapes, so
// it is written as it is.
func appendKey(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendMapKey writes a map key as a member's name, escaped, and colon, after a
// comma unless the member is the object's first.
func appendMapKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = appendString(b, key)
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
// float64. Below 10^15 ns (11 days) that float64 has no shorter form than the
// exact quotient — two decimals of at most 15 digits never round to the same
// float64 — so it is written from the integer, without formatting a float.
func appendMillis(b []byte, d units.Millis) []byte {
	const exactBelow = 1e15
	ns := int64(d)
	if ns <= -exactBelow || ns >= exactBelow {
		return appendFloat64(b, float64(d)/float64(time.Millisecond))
	}
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendUint(b, uint64(ns/1e6), 10)
	frac := ns % 1e6
	if frac == 0 {
		return b
	}
	digits := [7]byte{'.'}
	for k := 6; k > 0; k-- {
		digits[k] = byte('0' + frac%10)
		frac /= 10
	}
	n := len(digits)
	for digits[n-1] == '0' {
		n--
	}
	return append(b, digits[:n]...)
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
//
// It writes into b's capacity directly, eight bytes at a time, and may leave up
// to stringSlack bytes of scratch past the returned length. A trace's long
// strings are an answer's draft, often CJK prose around a claims block in JSON
// (an escape every ten bytes), and the client's messages: one pass copies the
// runs between escapes a word at a time while it checks the UTF-8, where calling
// append for each run and utf8.ValidString beforehand took most of the trace's
// encoding.
//
// s goes in blocks of at most stringBlock bytes, each with room in b for it
// escaped at its longest, so that appendRun, which writes a block, never checks
// for room nor calls anything, and keeps its values in registers.
func appendString(b []byte, s string) []byte {
	n := len(s)
	out := len(b)
	buf := growString(b, out, n+2+stringSlack)
	buf[out] = '"'
	out++
	i := 0
	for i < n {
		// appendRun may read past the block's end to finish a word (seven bytes)
		// or a character (two), and every byte it reads may become six: the
		// block is what the room in buf allows, up to stringBlock.
		if block := (cap(buf)-out-stringSlack)/6 - 7; block > 0 {
			end := i + min(n-i, block, stringBlock)
			if out, i = appendRun(buf, out, s, i, end); i >= end {
				continue
			}
		} else if room := n - i + 5 + stringSlack; cap(buf)-out < room {
			// buf grows, as it would with append, only when the rest of s does
			// not fit as it is, with the next byte escaped at its longest: a
			// caller that sized b for the usual escapes (SetChoiceContent)
			// sees no growth.
			buf = growString(buf, out, room)
			continue
		}
		// One character: one that appendRun leaves — at the end of s, of four
		// bytes, with a lead byte whose range of second bytes is narrower (E0,
		// ED), U+2028 and U+2029, or not UTF-8 — or any when buf has no room for
		// a block.
		if c := s[i]; c < utf8.RuneSelf {
			e := asciiOut[c]
			binary.LittleEndian.PutUint64(buf[out:out+8], e)
			out += int(e >> 56)
			i++
			continue
		}
		switch size := utf8Size(s, i); {
		case size == 0:
			binary.LittleEndian.PutUint64(buf[out:out+8], escapeFFFD)
			out += 6
			i++
		case size == 3 && s[i] == 0xE2 && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8:
			binary.LittleEndian.PutUint64(buf[out:out+8], escape2028|uint64(jsonHex[s[i+2]&0xf])<<40)
			out += 6
			i += 3
		default:
			for k := range size {
				buf[out+k] = s[i+k]
			}
			out += size
			i += size
		}
	}
	buf = growString(buf, out, 1)
	buf[out] = '"'
	return buf[:out+1]
}

// stringBlock is the most bytes of a string appendString hands appendRun at a
// time.
const stringBlock = 256

// stringSlack is the room appendString keeps past what it writes: one
// eight-byte store.
const stringSlack = 8

// appendRun writes s from i on into buf at out, as appendString does, until i
// reaches end or a character appendRun leaves to appendString (see there), and
// returns out and i there. It may read on past end to finish a word (seven bytes
// at most) or a character (two). buf must have room from out on for the bytes
// it reads escaped at their longest (six each) and stringSlack bytes more:
// appendRun does not check it (but for the bounds checks of each index), so
// that the loop keeps its values in registers.
func appendRun(buf []byte, out int, s string, i, end int) (int, int) {
	for i < end {
		if i+8 <= len(s) {
			w := load8(s, i)
			m := stringMask(w)
			binary.LittleEndian.PutUint64(buf[out:out+8], w)
			if m == 0 {
				i += 8
				out += 8
				continue
			}
			// The word's ASCII bytes to escape are written from w and m, each
			// followed by the rest of the word, which stands for itself up to
			// the next one: the word is not read again for each escape. While in
			// the word, out is where its first byte would go were it all written
			// from here, so its byte k goes at out+k.
			for {
				at := bits.TrailingZeros64(m) & 56 // the byte's bit offset
				c := byte(w >> at)
				if c >= utf8.RuneSelf {
					i += at >> 3
					out += at >> 3
					break // a multi-byte character: below
				}
				e := asciiOut[c&(utf8.RuneSelf-1)]
				k := out + at>>3
				binary.LittleEndian.PutUint64(buf[k:k+8], e)
				size := int(e >> 56)
				binary.LittleEndian.PutUint64(buf[k+size:k+size+8], bits.RotateLeft64(w, -at-8))
				out += size - 1
				if m &= m - 1; m == 0 {
					i += 8
					out += 8
					break
				}
			}
			if m == 0 {
				continue
			}
		} else if c := s[i]; c < utf8.RuneSelf {
			// The last bytes of s, one at a time.
			e := asciiOut[c]
			binary.LittleEndian.PutUint64(buf[out:out+8], e)
			out += int(e >> 56)
			i++
			continue
		}
		// A run of characters of two or three bytes (CJK prose), up to the next
		// ASCII byte, another character or the end of the block.
		for i < end && i+4 <= len(s) {
			w := load4(s, i)
			if w&0xC0C0F0 == 0x8080E0 && 0x2001>>(w&0xF)&1 == 0 && w&0xFEFFFF != 0xA880E2 { // E1–EC, EE, EF
				binary.LittleEndian.PutUint32(buf[out:out+4], w)
				i += 3
				out += 3
				continue
			}
			if w&0xC0E0 == 0x80C0 && byte(w) >= 0xC2 {
				binary.LittleEndian.PutUint32(buf[out:out+4], w)
				i += 2
				out += 2
				continue
			}
			break
		}
		if i < len(s) && s[i] >= utf8.RuneSelf {
			return out, i // a character for appendString
		}
	}
	return out, i
}

// growString returns b with room for need bytes from out on, at its full
// capacity; b[:out] is kept.
func growString(b []byte, out, need int) []byte {
	if cap(b)-out < need {
		b = slices.Grow(b[:out], need)
	}
	return b[:cap(b)]
}

// load8 reads the eight bytes at s[i:] as a little-endian word.
func load8(s string, i int) uint64 {
	w := s[i : i+8] // one bounds check: the compiler merges the loads into one
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// load4 reads the four bytes at s[i:] as a little-endian word.
func load4(s string, i int) uint32 {
	w := s[i : i+4]
	return uint32(w[0]) | uint32(w[1])<<8 | uint32(w[2])<<16 | uint32(w[3])<<24
}

// stringMask sets the high bit of each of the eight bytes of v that does not
// stand for itself in an HTML-safe JSON string — a control character, '"', '\\',
// '<', '>', '&', or a byte of a multi-byte sequence — and no other bit. Each test
// adds to seven-bit values only, so no carry crosses from one byte to the next.
// Zero: all eight stand for themselves.
func stringMask(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	low := v &^ highs
	// Each sets a byte's high bit where the byte is not the one tested for.
	notControl := low + (0x80-0x20)*ones
	notQuoteAmp := (low | 4*ones) ^ '&'*ones + 0x7f*ones // '"' and '&' differ in bit 2 only
	notAngle := (low | 2*ones) ^ '>'*ones + 0x7f*ones    // '<' and '>' in bit 1
	notBackslash := low ^ '\\'*ones + 0x7f*ones
	return (^(notControl & notQuoteAmp & notAngle & notBackslash) | v) & highs
}

// utf8Size returns the length of the UTF-8 sequence at s[i] (whose first byte is
// not ASCII), or 0 when it is not valid UTF-8 — as utf8.DecodeRuneInString
// returns utf8.RuneError and 1 for it: a stray continuation byte, a lead byte
// that cannot start a sequence (C0, C1, F5–FF), a sequence cut short, an overlong
// form, a surrogate or a code point above U+10FFFF.
func utf8Size(s string, i int) int {
	c := s[i]
	switch {
	case c < 0xC2:
		return 0
	case c < 0xE0:
		if i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
			return 2
		}
	case c < 0xF0:
		if i+2 < len(s) {
			c1, c2 := s[i+1], s[i+2]
			lo, hi := byte(0x80), byte(0xBF)
			switch c {
			case 0xE0:
				lo = 0xA0 // below: overlong
			case 0xED:
				hi = 0x9F // above: a surrogate
			}
			if c1 >= lo && c1 <= hi && c2&0xC0 == 0x80 {
				return 3
			}
		}
	case c < 0xF5:
		if i+3 < len(s) {
			c1, c2, c3 := s[i+1], s[i+2], s[i+3]
			lo, hi := byte(0x80), byte(0xBF)
			switch c {
			case 0xF0:
				lo = 0x90 // below: overlong
			case 0xF4:
				hi = 0x8F // above: beyond U+10FFFF
			}
			if c1 >= lo && c1 <= hi && c2&0xC0 == 0x80 && c3&0xC0 == 0x80 {
				return 4
			}
		}
	}
	return 0
}

// escapeFFFD and escape2028 are \ufffd and \u202 as little-endian words; the
// last hex digit of \u2028 or \u2029 goes in byte 5.
var (
	escapeFFFD = word(`\ufffd`)
	escape2028 = word(`\u202`)
)

// asciiOut holds, for each ASCII byte, what appendString writes for it as a
// little-endian word: the byte itself or its escape in the low bytes, the length
// in the top byte.
var asciiOut = func() (out [utf8.RuneSelf]uint64) {
	for c := range byte(utf8.RuneSelf) {
		text := []byte{c}
		if !htmlSafe[c] {
			text = appendEscapedASCII(nil, c)
		}
		out[c] = word(string(text)) | uint64(len(text))<<56
	}
	return out
}()

// word packs up to seven bytes of s into a little-endian word.
func word(s string) uint64 {
	var w uint64
	for k := range len(s) {
		w |= uint64(s[k]) << (8 * k)
	}
	return w
}

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
