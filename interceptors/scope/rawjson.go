package scope

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The request body has been checked with gjson.ValidBytes at the proxy's boundary,
// so these helpers walk valid JSON only: they find values' raw spans without
// decoding them, which keeps a 17,797-line operation log in a user message from
// being copied or unescaped just to find the messages and their roles. On invalid
// input they stop early and report what they found so far; they never panic.

// bytesView returns b as a string without copying. The string must not outlive b
// or be kept after b is edited; copy what is kept (strings.Clone).
func bytesView(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
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

// valueEnd returns the index just past the JSON value starting at s[i], or -1.
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
		for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\n' && s[j] != '\r' && s[j] != '\t' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// span is a value's raw JSON text and its offset in the text it was found in.
type span struct {
	raw string
	off int
}

// eachMember calls fn with each member of the JSON object obj: the key (raw, without
// its quotes; unescape it with jsonKey) and the value's span (offsets relative to
// obj). It stops when fn returns false. A value that is not an object yields nothing.
func eachMember(obj string, fn func(key string, value span) bool) {
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
		key := obj[i+1 : ke-1]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		ve := valueEnd(obj, i)
		if ve < 0 {
			return
		}
		if !fn(key, span{obj[i:ve], i}) {
			return
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// eachElement calls fn with each element's span of the JSON array arr (offsets
// relative to arr). It stops when fn returns false. A value that is not an array
// yields nothing.
func eachElement(arr string, fn func(value span) bool) {
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
		if !fn(span{arr[i:ve], i}) {
			return
		}
		i = skipSpace(arr, ve)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

// member returns the span of the object's member named key. With a duplicate key
// the last one wins, as in the JSON decoders upstreams use (Python's json, Go's
// encoding/json), so factgate reads what the upstream will read.
func member(obj, key string) (span, bool) {
	var out span
	found := false
	eachMember(obj, func(k string, v span) bool {
		if jsonKeyIs(k, key) {
			out, found = v, true
		}
		return true
	})
	return out, found
}

// jsonKeyIs reports whether the raw key (without quotes) spells name.
func jsonKeyIs(raw, name string) bool {
	if strings.IndexByte(raw, '\\') < 0 {
		return raw == name
	}
	return unescape(raw, -1) == name
}

// jsonKey returns the raw key (without quotes) unescaped.
func jsonKey(raw string) string {
	if strings.IndexByte(raw, '\\') < 0 {
		return raw
	}
	return unescape(raw, -1)
}

// stringValue returns the decoded value of a raw JSON string ("\"...\""); ok is
// false when raw is not a string. Without escapes the result aliases raw.
func stringValue(raw string) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	return unescape(inner, -1), true
}

// unescape decodes the inside of a JSON string (without its quotes). With limit >= 0
// it stops once at least limit bytes are decoded, so that reading the head of a
// long text costs the head only. Invalid escapes end the text.
func unescape(s string, limit int) string {
	n := len(s)
	if limit >= 0 && limit < n {
		n = limit
	}
	var b strings.Builder
	b.Grow(n + utf8.UTFMax)
	for i := 0; i < len(s); {
		if limit >= 0 && b.Len() >= limit {
			break
		}
		if s[i] != '\\' {
			// Copy the run up to the next escape (or the limit) at once.
			j := strings.IndexByte(s[i:], '\\')
			if j < 0 {
				j = len(s) - i
			}
			if limit >= 0 && j > limit-b.Len() {
				j = limit - b.Len()
			}
			b.WriteString(s[i : i+j])
			i += j
			continue
		}
		if i+1 >= len(s) {
			break
		}
		switch s[i+1] {
		case '"', '\\', '/':
			b.WriteByte(s[i+1])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok {
				return b.String()
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := hex4(s, i+2)
				if ok && s[i] == '\\' && s[i+1] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					}
				}
				if utf16.IsSurrogate(r) {
					r = utf8.RuneError
				}
			}
			b.WriteRune(r)
			continue
		default:
			return b.String()
		}
		i += 2
	}
	return b.String()
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
