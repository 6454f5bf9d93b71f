package mockupstream

import (
	"bytes"
	"encoding/json"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// jsonBody is a JSON body as the exchange writes it: b itself, or with
// Options.Indent b indented by two spaces and ending with a newline.
func (ex *exchange) jsonBody(b []byte) []byte {
	if !ex.indent {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/4)
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return b // not JSON (a malformed fault): as it is
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// appendDataLines appends one SSE event's "data:" field carrying data: one
// line, or with Options.Indent the indented JSON over one "data:" line per line
// (an SSE client joins them with newlines into the same JSON). The event's
// closing blank line is the caller's.
func (ex *exchange) appendDataLines(dst, data []byte) []byte {
	if ex.indent {
		var out bytes.Buffer
		if err := json.Indent(&out, data, "", "  "); err == nil {
			for line := range bytes.SplitSeq(out.Bytes(), []byte("\n")) {
				dst = append(dst, "data: "...)
				dst = append(dst, line...)
				dst = append(dst, '\n')
			}
			return dst
		}
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n')
}

// appendErrorEnvelope appends the OpenAI error envelope
// {"error":{"message","type","param","code"}}; an empty param or code is null.
func appendErrorEnvelope(b []byte, typ, code, param, msg string) []byte {
	b = append(b, `{"error":{"message":`...)
	b = rawjson.AppendString(b, msg)
	b = append(b, `,"type":`...)
	b = rawjson.AppendString(b, typ)
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
	return rawjson.AppendString(b, s)
}
