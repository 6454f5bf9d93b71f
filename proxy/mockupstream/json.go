package mockupstream

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a quoted JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does; HTML characters are left as they are (the mock's output is
// never embedded in HTML), which is also what OpenAI sends.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript; escape them as
		// encoding/json does so no client's line-based reader is surprised.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendErrorEnvelope appends the OpenAI error envelope
// {"error":{"message","type","param","code"}}; an empty param or code is null.
func appendErrorEnvelope(b []byte, typ, code, param, msg string) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendJSONString(b, msg)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, typ)
	b = append(b, `,"param":`...)
	b = appendNullableString(b, param)
	b = append(b, `,"code":`...)
	b = appendNullableString(b, code)
	return append(b, `}}`...)
}

func appendNullableString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// forEachMember calls fn with the raw key and raw value of every member of the JSON
// object obj, which must be valid JSON. Unlike gjson it never decodes a value, so a
// long escaped string costs a scan, not an allocation.
func forEachMember(obj string, fn func(key, value string) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return
		}
		if obj[i] == ',' {
			i++
			continue
		}
		keyEnd := endOfString(obj, i)
		key := obj[i:keyEnd]
		i = skipSpace(obj, keyEnd)
		i = skipSpace(obj, i+1) // the colon
		if i >= len(obj) {
			return
		}
		valueEnd := endOfValue(obj, i)
		if !fn(key, obj[i:valueEnd]) {
			return
		}
		i = valueEnd
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// endOfString is the index after the closing quote of the string starting at s[i].
func endOfString(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(s)
}

// endOfValue is the index after the JSON value starting at s[i].
func endOfValue(s string, i int) int {
	switch s[i] {
	case '"':
		return endOfString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				j = endOfString(s, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(s)
	default:
		j := i
		for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\t' && s[j] != '\n' && s[j] != '\r' {
			j++
		}
		return j
	}
}

// jsonStringValue decodes a raw JSON string; it is "" for any other value. Strings
// without escapes are sliced, not copied.
func jsonStringValue(raw string) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if !strings.Contains(raw, `\`) {
		return raw[1 : len(raw)-1]
	}
	return gjson.Parse(raw).Str
}

// unescapedLen is the length in bytes of the JSON string literal raw (quotes
// included) once unescaped the way gjson does it: a lone surrogate becomes U+FFFD.
func unescapedLen(raw string) int {
	if len(raw) < 2 {
		return 0
	}
	s := raw[1 : len(raw)-1]
	n := 0
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			n++
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		if s[i+1] != 'u' {
			n++
			i += 2
			continue
		}
		r, ok := hex4(s, i+2)
		if !ok {
			// gjson stops decoding at a broken escape; the text ends there.
			return n
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if r2, ok := hex4(s, i+2); ok && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					n += utf8.RuneLen(d)
					i += 6
					continue
				}
			}
			r = utf8.RuneError
		}
		n += utf8.RuneLen(r)
	}
	return n
}

// hex4 reads four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
