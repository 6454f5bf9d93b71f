package proxy

import (
	"bufio"
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// keepAlive is the SSE comment sent while a streaming client waits for a held answer.
const keepAlive = ": keep-alive\n\n"

// Known fields of a chat.completion that the synthesized stream maps explicitly;
// any other top-level field goes into the first chunk unchanged.
var completionFields = map[string]bool{
	"id": true, "object": true, "created": true, "model": true, "system_fingerprint": true,
	"choices": true, "usage": true, "service_tier": true,
}

var messageFields = map[string]bool{"role": true, "content": true, "reasoning_content": true, "tool_calls": true}

// writeCompletionStream writes a complete chat.completion body as the stream of
// chat.completion.chunk events a streaming client expects: per choice a role
// chunk, reasoning and content in pieces of chunkRunes characters, tool calls, a
// finish chunk; then a usage chunk when includeUsage; then "data: [DONE]". It
// carries the same content as the non-streamed answer.
//
// comment, when not empty, is sent as SSE comment lines just before [DONE] (clients
// ignore comments): the held stream's way to tell what response headers could not.
func writeCompletionStream(w *bufio.Writer, body []byte, includeUsage bool, chunkRunes int, comment ...string) error {
	if chunkRunes <= 0 {
		chunkRunes = 32
	}
	root := gjson.ParseBytes(body)
	// head is the common prefix of every chunk: {"id":..,"object":"chat.completion.chunk",...
	head := make([]byte, 0, 160)
	head = append(head, `{"id":`...)
	head = appendRawOr(head, root.Get("id"), `"chatcmpl-factgate"`)
	head = append(head, `,"object":"chat.completion.chunk","created":`...)
	head = appendRawOr(head, root.Get("created"), "0")
	head = append(head, `,"model":`...)
	head = appendRawOr(head, root.Get("model"), `""`)
	if sf := root.Get("system_fingerprint"); sf.Exists() {
		head = append(head, `,"system_fingerprint":`...)
		head = append(head, sf.Raw...)
	}
	if st := root.Get("service_tier"); st.Exists() {
		head = append(head, `,"service_tier":`...)
		head = append(head, st.Raw...)
	}
	var extra []byte // unknown top-level fields, sent once in the first chunk
	root.ForEach(func(k, v gjson.Result) bool {
		if !completionFields[k.Str] {
			extra = append(extra, ',')
			extra = append(extra, k.Raw...)
			extra = append(extra, ':')
			extra = append(extra, v.Raw...)
		}
		return true
	})

	buf := make([]byte, 0, 512)
	first := true
	emit := func(index int64, delta []byte, finish gjson.Result) error {
		buf = append(buf[:0], "data: "...)
		buf = append(buf, head...)
		if first {
			buf = append(buf, extra...)
			first = false
		}
		buf = append(buf, `,"choices":[{"index":`...)
		buf = strconv.AppendInt(buf, index, 10)
		buf = append(buf, `,"delta":`...)
		buf = append(buf, delta...)
		buf = append(buf, `,"logprobs":null,"finish_reason":`...)
		if finish.Exists() {
			buf = append(buf, finish.Raw...)
		} else {
			buf = append(buf, "null"...)
		}
		buf = append(buf, "}]}\n\n"...)
		_, err := w.Write(buf)
		return err
	}
	var none gjson.Result
	var err error
	root.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		idx := ch.Get("index").Int()
		msg := ch.Get("message")
		role := msg.Get("role").Str
		if role == "" {
			role = "assistant"
		}
		d := append([]byte(nil), `{"role":`...)
		d = rawjson.AppendString(d, role)
		d = append(d, `,"content":""`...)
		msg.ForEach(func(k, v gjson.Result) bool {
			if !messageFields[k.Str] {
				d = append(d, ',')
				d = append(d, k.Raw...)
				d = append(d, ':')
				d = append(d, v.Raw...)
			}
			return true
		})
		d = append(d, '}')
		if err = emit(idx, d, none); err != nil {
			return false
		}
		for _, field := range [...]string{"reasoning_content", "content"} {
			text := msg.Get(field).String()
			for len(text) > 0 {
				piece := runePrefix(text, chunkRunes)
				text = text[len(piece):]
				d = append(d[:0], `{"`...)
				d = append(d, field...)
				d = append(d, `":`...)
				d = rawjson.AppendString(d, piece)
				d = append(d, '}')
				if err = emit(idx, d, none); err != nil {
					return false
				}
			}
		}
		if tc := msg.Get("tool_calls"); tc.IsArray() && len(tc.Array()) > 0 {
			d = append(d[:0], `{"tool_calls":[`...)
			for i, call := range tc.Array() {
				if i > 0 {
					d = append(d, ',')
				}
				d = append(d, `{"index":`...)
				d = strconv.AppendInt(d, int64(i), 10)
				call.ForEach(func(k, v gjson.Result) bool {
					if k.Str != "index" {
						d = append(d, ',')
						d = append(d, k.Raw...)
						d = append(d, ':')
						d = append(d, v.Raw...)
					}
					return true
				})
				d = append(d, '}')
			}
			d = append(d, "]}"...)
			if err = emit(idx, d, none); err != nil {
				return false
			}
		}
		fin := ch.Get("finish_reason")
		if !fin.Exists() || fin.Type == gjson.Null {
			fin = gjson.Parse(`"stop"`)
		}
		err = emit(idx, []byte("{}"), fin)
		return err == nil
	})
	if err != nil {
		return err
	}
	if includeUsage {
		buf = append(buf[:0], "data: "...)
		buf = append(buf, head...)
		buf = append(buf, `,"choices":[],"usage":`...)
		buf = appendRawOr(buf, root.Get("usage"), "null")
		buf = append(buf, "}\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	for _, c := range comment {
		_, _ = w.WriteString(": ")
		_, _ = w.WriteString(c)
		_, _ = w.WriteString("\n")
	}
	if len(comment) > 0 {
		_ = w.WriteByte('\n')
	}
	if _, err := w.WriteString("data: [DONE]\n\n"); err != nil {
		return err
	}
	return w.Flush()
}

// writeStreamError ends a stream whose headers are already sent with an error
// event carrying the OpenAI error envelope, then [DONE].
func writeStreamError(w *bufio.Writer, envelope []byte) error {
	if _, err := w.WriteString("data: "); err != nil {
		return err
	}
	_, _ = w.Write(envelope)
	_, _ = w.WriteString("\n\ndata: [DONE]\n\n")
	return w.Flush()
}

func appendRawOr(dst []byte, r gjson.Result, or string) []byte {
	if r.Exists() {
		return append(dst, r.Raw...)
	}
	return append(dst, or...)
}

// runePrefix returns the longest prefix of s with at most n runes.
func runePrefix(s string, n int) string {
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}
