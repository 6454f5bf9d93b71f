package rawjson

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The walker finds values' raw text in JSON that Check accepted, without decoding
// them: a 17,797-line operation log in a user message costs a memory scan, not a
// copy or an unescape, to find the messages and their roles. On invalid input it
// stops early and reports what it found so far; it never panics, and each call
// reads its input once.

// Value is a JSON value's raw text and its offset in the text it was found in.
type Value struct {
	// Raw is the value's JSON text: a string with its quotes, an object with its
	// braces.
	Raw string
	// Off is the byte offset of Raw in the object or array walked.
	Off int
}

// Member is one member of a JSON object.
type Member struct {
	// Key is the member's name as written, without its quotes and with its escapes
	// (decode it with Key or compare it with KeyIs).
	Key string
	// KeyOff is the byte offset of the key's opening quote in the object walked.
	KeyOff int
	// Value is the member's value.
	Value
}

// EachMember calls fn with each member of the JSON object obj, in order,
// duplicates included. It stops when fn returns false. A value that is not an
// object yields nothing.
func EachMember(obj string, fn func(m Member) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // '}' or invalid
		}
		ke := stringEnd(obj, i)
		if ke < 0 {
			return
		}
		m := Member{Key: obj[i+1 : ke-1], KeyOff: i}
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		ve := valueEnd(obj, i)
		if ve < 0 {
			return
		}
		m.Value = Value{Raw: obj[i:ve], Off: i}
		if !fn(m) {
			return
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// EachElement calls fn with each element of the JSON array arr, in order. It stops
// when fn returns false. A value that is not an array yields nothing.
func EachElement(arr string, fn func(v Value) bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		ve := valueEnd(arr, i)
		if ve < 0 {
			return
		}
		if !fn(Value{Raw: arr[i:ve], Off: i}) {
			return
		}
		i = skipSpace(arr, ve)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

// Find returns the value of the object's member named name. With a duplicate name
// the last one wins, as in the JSON decoders upstreams use (Python's json, Go's
// encoding/json), so factgate reads what the upstream will read.
func Find(obj, name string) (Value, bool) {
	var out Value
	found := false
	EachMember(obj, func(m Member) bool {
		if KeyIs(m.Key, name) {
			out, found = m.Value, true
		}
		return true
	})
	return out, found
}

// KeyIs reports whether the raw key (as in Member.Key) spells name.
func KeyIs(raw, name string) bool {
	if strings.IndexByte(raw, '\\') < 0 {
		return raw == name
	}
	return Unescape(raw, -1) == name
}

// Key returns the raw key (as in Member.Key) decoded. Without escapes the result
// aliases raw.
func Key(raw string) string {
	if strings.IndexByte(raw, '\\') < 0 {
		return raw
	}
	return Unescape(raw, -1)
}

// StringValue returns the decoded value of a raw JSON string (with its quotes); ok
// is false when raw is not a string. Without escapes the result aliases raw.
// Bytes that are not UTF-8 are kept as they are.
func StringValue(raw string) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	return Unescape(inner, -1), true
}

// Unescape decodes the inside of a JSON string (without its quotes). With limit >= 0
// it stops once at least limit bytes are decoded, so that reading the head of a
// long text costs the head only. A lone surrogate escape becomes U+FFFD, as in
// encoding/json and gjson; an invalid escape ends the text.
func Unescape(s string, limit int) string {
	n := len(s)
	if limit >= 0 && limit < n {
		n = limit
	}
	b := AppendUnescape(make([]byte, 0, n+utf8.UTFMax), s, limit)
	// unsafe: a string over a fresh buffer never written again, as strings.Builder does (docs/architecture.md, Lifetimes).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// AppendUnescape appends Unescape(s, limit) to dst and returns the extended
// buffer; limit counts the bytes appended. It appends without allocating when
// dst has room for min(len(s), limit) + utf8.UTFMax bytes.
func AppendUnescape(dst []byte, s string, limit int) []byte {
	if limit < 0 {
		return appendUnescapeAll(dst, s)
	}
	return AppendUnescapeLines(dst, s, limit, -1)
}

// shortEscape maps the letter after a backslash to the byte it stands for, for
// the two-character escapes of JSON strings; 0 for any other letter.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// appendUnescapeAll is AppendUnescapeLines(dst, s, -1, -1): the whole text. It
// decodes into dst grown once to hold len(s) more bytes (decoding never
// lengthens: an escape is at least as long as what it stands for), and copies
// eight bytes at a time up to the next backslash, so that a text dense with
// escapes — an answer carrying a JSON claims block writes \" every few bytes —
// does not pay a search and a copy call per escape.
func appendUnescapeAll(dst []byte, s string) []byte {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	k := len(dst)
	buf := slices.Grow(dst, len(s))[:len(dst)+len(s)]
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			w := load8(s, i)
			x := w ^ ('\\' * ones)
			m := (x - ones) &^ x & highs              // the high bit of each backslash (exact for the first)
			binary.LittleEndian.PutUint64(buf[k:], w) // k+8 <= len(buf): k-len(dst) <= i
			if m == 0 {
				i, k = i+8, k+8
				continue
			}
			n := bits.TrailingZeros64(m) >> 3
			i, k = i+n, k+n
		} else if s[i] != '\\' {
			buf[k] = s[i]
			i, k = i+1, k+1
			continue
		}
		// s[i] is a backslash.
		if i+1 >= len(s) {
			break
		}
		if b := shortEscape[s[i+1]]; b != 0 {
			buf[k] = b
			i, k = i+2, k+1
			continue
		}
		if s[i+1] != 'u' {
			return buf[:k]
		}
		r, size := unicodeEscape(s, i)
		if size == 0 {
			return buf[:k]
		}
		k += utf8.EncodeRune(buf[k:], r) // size >= 6 > utf8.UTFMax: room
		i += size
	}
	return buf[:k]
}

// AppendUnescapeLines is AppendUnescape that also stops once it has appended
// lines newlines (lines < 0: no bound), so that reading the first lines of a long
// text costs those lines only.
func AppendUnescapeLines(dst []byte, s string, limit, lines int) []byte {
	dst, _ = AppendUnescapeLinesFrom(dst, s, limit, lines)
	return dst
}

// AppendUnescapeLinesFrom is AppendUnescapeLines that also says where to go on:
// when it stopped after the lines-th newline, rest is the offset in s of the
// input that follows it, and AppendUnescapeLinesFrom(dst, s[rest:], limit-n,
// more) (n the bytes appended so far) appends what one call with lines+more
// would have; otherwise (the end of s, the limit, an invalid escape) rest is -1
// and there is nothing more to decode (a limit < 0 stays as it is on the way).
// A caller reads a text's first lines, and decodes further only when it needs
// more.
func AppendUnescapeLinesFrom(dst []byte, s string, limit, lines int) (out []byte, rest int) {
	base := len(dst)
	for i := 0; i < len(s); {
		if limit >= 0 && len(dst)-base >= limit {
			break
		}
		if s[i] != '\\' {
			// Copy the run up to the next escape (or the limit) at once.
			j := strings.IndexByte(s[i:], '\\')
			if j < 0 {
				j = len(s) - i
			}
			if limit >= 0 && j > limit-(len(dst)-base) {
				j = limit - (len(dst) - base)
			}
			dst = append(dst, s[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(s) {
			break
		}
		switch b := shortEscape[s[i+1]]; {
		case b == '\n':
			dst = append(dst, b)
			if lines--; lines == 0 {
				return dst, i + 2
			}
		case b != 0:
			dst = append(dst, b)
		case s[i+1] == 'u':
			r, size := unicodeEscape(s, i)
			if size == 0 {
				return dst, -1
			}
			dst = utf8.AppendRune(dst, r)
			if r == '\n' {
				if lines--; lines == 0 {
					return dst, i + size
				}
			}
			i += size
			continue
		default:
			return dst, -1
		}
		i += 2
	}
	return dst, -1
}

// UnescapedLen is len(s) of StringValue(raw) for a raw JSON string, counted
// without decoding (0 for anything else).
func UnescapedLen(raw string) int {
	if len(raw) < 2 || raw[0] != '"' {
		return 0
	}
	s := raw[1 : len(raw)-1]
	n := 0
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			j := strings.IndexByte(s[i:], '\\')
			if j < 0 {
				return n + len(s) - i
			}
			n += j
			i += j
			continue
		}
		if i+1 >= len(s) {
			break
		}
		if s[i+1] != 'u' {
			if shortEscape[s[i+1]] == 0 {
				return n // Unescape stops at an invalid escape
			}
			n++
			i += 2
			continue
		}
		r, size := unicodeEscape(s, i)
		if size == 0 {
			return n
		}
		n += utf8.RuneLen(r)
		i += size
	}
	return n
}

// unicodeEscape decodes the \uXXXX escape at s[i] and, for a surrogate pair, the
// one after it; size is the bytes read, 0 when the escape is malformed.
func unicodeEscape(s string, i int) (r rune, size int) {
	r, ok := hex4(s, i+2)
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if i+7 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
		if r2, ok := hex4(s, i+8); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12
			}
		}
	}
	return utf8.RuneError, 6
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// stringEnd returns the index just past the closing quote of the string whose
// opening quote is at s[i], or -1. Quotes are found with IndexByte, so a long
// string costs a memory scan, not a byte loop.
func stringEnd(s string, i int) int {
	j := i + 1
	for {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && s[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// valueEnd returns the index just past the JSON value starting at s[i], or -1. A
// container is skipped by counting brackets outside strings, without recursion.
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				e := stringEnd(s, i)
				if e < 0 {
					return -1
				}
				i = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && !isSpace(s[j]) {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// ScanMembers walks the JSON object starting at s[i] like EachMember, but in one
// read of the text: fn is called with each member's raw key and the offset of its
// value in s, and returns the offset just past the value when it read the value
// itself (to descend into it with ScanMembers or ScanElements, say), or -1 to have
// the walker skip it. ScanMembers returns the offset just past the object, or -1
// when s[i] does not start one or the text ends early or fn returned an offset
// that is not followed by a member separator or the object's end.
func ScanMembers(s string, i int, fn func(key string, value int) int) int {
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != '{' {
		return -1
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return -1
		}
		ke := stringEnd(s, i)
		if ke < 0 {
			return -1
		}
		key := s[i+1 : ke-1]
		i = skipSpace(s, ke)
		if i >= len(s) || s[i] != ':' {
			return -1
		}
		i = skipSpace(s, i+1)
		ve := fn(key, i)
		if ve < 0 {
			ve = valueEnd(s, i)
		}
		if ve < 0 {
			return -1
		}
		i = skipSpace(s, ve)
		if i >= len(s) {
			return -1
		}
		switch s[i] {
		case '}':
			return i + 1
		case ',':
			i = skipSpace(s, i+1)
		default:
			return -1
		}
	}
}

// ScanElements walks the JSON array starting at s[i] in one read of the text, as
// ScanMembers walks an object: fn gets each element's offset in s and returns the
// offset just past it, or -1 to have it skipped. It returns the offset just past
// the array, or -1.
func ScanElements(s string, i int, fn func(value int) int) int {
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != '[' {
		return -1
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return i + 1
	}
	for {
		ve := fn(i)
		if ve < 0 {
			ve = valueEnd(s, i)
		}
		if ve < 0 {
			return -1
		}
		i = skipSpace(s, ve)
		if i >= len(s) {
			return -1
		}
		switch s[i] {
		case ']':
			return i + 1
		case ',':
			i = skipSpace(s, i+1)
		default:
			return -1
		}
	}
}

// ValueEnd returns the offset just past the JSON value starting at s[i], or -1.
func ValueEnd(s string, i int) int { return valueEnd(s, i) }
