package mockupstream

import (
	"unicode/utf8"
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
