package mockupstream

import "github.com/factgate/factgate/knowledge/rawjson"

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
