package console

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
)

// CaptureRequest returns the client's request for the trace page: the model, the
// stream flag and each message's role and text, the text cut at limit bytes (on a
// character boundary) so that an operation log of megabytes costs the trace at
// most limit. Only the kept prefix is unescaped: the cost does not grow with the
// log. body must be valid JSON (the proxy checked it).
func CaptureRequest(body []byte, limit int) *interceptors.TraceRequest {
	tr := &interceptors.TraceRequest{
		Model:    gjson.GetBytes(body, "model").String(),
		Stream:   gjson.GetBytes(body, "stream").Bool(),
		Messages: []interceptors.TraceMessage{},
	}
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		msg := interceptors.TraceMessage{Role: m.Get("role").String()}
		content := m.Get("content")
		switch {
		case content.Type == gjson.String:
			msg.Content, msg.Bytes = cutJSONString(content.Raw, limit)
		case content.IsArray():
			// Text parts, joined by a newline as inject joins them.
			var b strings.Builder
			total := 0
			content.ForEach(func(_, part gjson.Result) bool {
				t := part.Get("text")
				if part.Get("type").String() != "text" || t.Type != gjson.String {
					return true
				}
				if total > 0 {
					b.WriteByte('\n')
					total++
				}
				text, n := cutJSONString(t.Raw, max(limit-b.Len(), 0))
				b.WriteString(text)
				total += n
				return true
			})
			msg.Content, msg.Bytes = b.String(), total
		}
		msg.Truncated = msg.Bytes > len(msg.Content)
		tr.Messages = append(tr.Messages, msg)
		return true
	})
	return tr
}

// cutJSONString decodes at most limit bytes of the JSON string literal raw
// (quotes included) and returns them with the decoded length of the whole string.
// The length is computed without allocating: escapes are counted, not decoded.
func cutJSONString(raw string, limit int) (string, int) {
	if len(raw) < 2 {
		return "", 0
	}
	inner := raw[1 : len(raw)-1]
	// Walk the escaped text; cut is where the decoded prefix reaches limit.
	decoded, cut := 0, -1
	for i := 0; i < len(inner); {
		step, size := 1, 1
		if inner[i] == '\\' && i+1 < len(inner) {
			step = 2
			if inner[i+1] == 'u' && i+6 <= len(inner) {
				step, size = unicodeEscape(inner[i:])
			}
		} else if inner[i] >= utf8.RuneSelf {
			_, step = utf8.DecodeRuneInString(inner[i:])
			size = step
		}
		if cut < 0 && decoded+size > limit {
			cut = i
		}
		decoded += size
		i += step
	}
	if cut < 0 {
		var s string
		_ = json.Unmarshal([]byte(raw), &s)
		return s, len(s)
	}
	var s string
	_ = json.Unmarshal([]byte(`"`+inner[:cut]+`"`), &s)
	return s, decoded
}

// unicodeEscape measures the \uXXXX escape at the start of s: the bytes it takes
// (12 for a surrogate pair, kept whole so that a cut never splits it) and the
// bytes its UTF-8 encoding takes.
func unicodeEscape(s string) (step, size int) {
	v, err := strconv.ParseUint(s[2:6], 16, 32)
	switch {
	case err != nil:
		return 6, 1
	case v >= 0xD800 && v < 0xDC00 && len(s) >= 12 && s[6] == '\\' && s[7] == 'u':
		return 12, 4
	}
	if n := utf8.RuneLen(rune(v)); n > 0 {
		return 6, n
	}
	return 6, 3 // a lone surrogate decodes to U+FFFD
}
