package console

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
)

// CaptureRequest returns the client's request for the trace page: the model the
// client asked for, the stream flag and each message's role and text, the text
// cut at limit bytes (on a character boundary) so that an operation log of
// megabytes costs the trace at most limit. The body is read with a raw scanner
// and only the kept prefix is unescaped: the cost does not grow with the log.
// ex.Original must be valid JSON (the proxy checked it).
func CaptureRequest(ex *interceptors.Exchange, limit int) *interceptors.TraceRequest {
	body := ex.Original
	tr := &interceptors.TraceRequest{Model: ex.Model, Stream: ex.Stream, Messages: []interceptors.TraceMessage{}}
	// The raw scanner the inject stage uses: nothing is unescaped but what is kept.
	ml, _ := reqcontext.FindMessages(body)
	for _, m := range ml.Items {
		msg := interceptors.TraceMessage{Role: m.Role}
		content := m.Content(body)
		switch {
		case bytes.HasPrefix(content, []byte(`"`)):
			msg.Content, msg.Bytes = cutJSONString(content, limit)
		case bytes.HasPrefix(content, []byte("[")):
			// Text parts, joined by a newline as inject joins them.
			var b strings.Builder
			total := 0
			gjson.ParseBytes(content).ForEach(func(_, part gjson.Result) bool {
				t := part.Get("text")
				if part.Get("type").String() != "text" || t.Type != gjson.String {
					return true
				}
				if total > 0 {
					b.WriteByte('\n')
					total++
				}
				text, n := cutJSONString([]byte(t.Raw), max(limit-b.Len(), 0))
				b.WriteString(text)
				total += n
				return true
			})
			msg.Content, msg.Bytes = b.String(), total
		}
		msg.Truncated = msg.Bytes > len(msg.Content)
		tr.Messages = append(tr.Messages, msg)
	}
	return tr
}

// cutJSONString decodes the JSON string literal raw (quotes included) up to limit
// decoded bytes, cut on a character boundary, and returns that prefix with the
// decoded length of the whole string. The rest is measured, not decoded: the
// cost of a long operation log is one scan.
func cutJSONString(raw []byte, limit int) (string, int) {
	if len(raw) < 2 {
		return "", 0
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner[:runeCut(inner, limit)]), len(inner)
	}
	var b strings.Builder
	b.Grow(min(limit, len(inner)))
	decoded, full := 0, false
	for i := 0; i < len(inner); {
		if inner[i] != '\\' {
			j := bytes.IndexByte(inner[i:], '\\')
			if j < 0 {
				j = len(inner)
			} else {
				j += i
			}
			run := inner[i:j]
			if !full {
				if room := limit - decoded; len(run) <= room {
					b.Write(run)
				} else {
					b.Write(run[:runeCut(run, room)])
					full = true
				}
			}
			decoded += len(run)
			i = j
			continue
		}
		r, step := unescapeAt(inner, i)
		n := utf8.RuneLen(r)
		if !full {
			if decoded+n <= limit {
				b.WriteRune(r)
			} else {
				full = true
			}
		}
		decoded += n
		i += step
	}
	return b.String(), decoded
}

// runeCut is the largest cut of s at most n bytes that ends on a character
// boundary.
func runeCut(s []byte, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// unescapeAt decodes the escape at s[i] ('\\') of a valid JSON string: the
// character (U+FFFD for a lone surrogate) and the bytes the escape takes.
func unescapeAt(s []byte, i int) (rune, int) {
	if i+1 >= len(s) {
		return utf8.RuneError, 1
	}
	switch s[i+1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(s, i+2)
		if utf16.IsSurrogate(r) {
			if i+11 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if pair := utf16.DecodeRune(r, hex4(s, i+8)); pair != utf8.RuneError {
					return pair, 12
				}
			}
			return utf8.RuneError, 6
		}
		return r, 6
	}
	return rune(s[i+1]), 2 // \" \\ \/
}

func hex4(s []byte, i int) rune {
	if i+4 > len(s) {
		return utf8.RuneError
	}
	v, err := strconv.ParseUint(string(s[i:i+4]), 16, 32)
	if err != nil {
		return utf8.RuneError
	}
	return rune(v)
}
