package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// keepAlive is what a streaming client gets while it waits for a held answer: a
// blank line, which every SSE parser skips (an empty event dispatches nothing).
// Not a comment: go-openai reads every line of a stream that is not "data:" into
// the buffer it decodes an error event from, so one ": keep-alive" before an
// error event turns the error into a JSON syntax error; a blank line adds nothing
// to that buffer.
const keepAlive = "\n"

// oneLine returns JSON as it may go into a "data:" line, which ends at the first
// line break: b itself when it holds none — JSON strings carry theirs escaped, so
// only the whitespace between tokens can (an upstream that indents its JSON, or
// ends it with a newline, as Go's json.Encoder does) — else b compacted. A b that
// is not JSON keeps its bytes with each line break made a space.
func oneLine(b []byte) []byte {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b))
	if json.Compact(&out, b) == nil {
		return out.Bytes()
	}
	return bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, b)
}

// Known fields of a chat.completion that the synthesized stream maps explicitly;
// any other top-level field goes into the first chunk unchanged.
var completionFields = map[string]bool{
	"id": true, "object": true, "created": true, "model": true, "system_fingerprint": true,
	"choices": true, "usage": true, "service_tier": true,
}

var messageFields = map[string]bool{"role": true, "content": true, "reasoning_content": true, "tool_calls": true}

// writeCompletionStream writes a complete chat.completion body as the stream of
// chat.completion.chunk events a streaming client expects, as OpenAI streams it:
// per choice a role chunk (content "" — null when the message's content is null),
// reasoning and content in pieces of chunkRunes characters, each tool call (a chunk
// with its index, id, type and function name, then its arguments in pieces), a
// finish chunk. The choices of an answer with several are interleaved, one event of
// each in turn, every chunk carrying one choice with its index. Then a usage chunk
// when includeUsage; then "data: [DONE]". It carries the same content as the
// non-streamed answer.
//
// comment, when not empty, is sent as SSE comment lines just before [DONE] (clients
// ignore comments): the held stream's way to tell what response headers could not.
func writeCompletionStream(w *bufio.Writer, body []byte, includeUsage bool, chunkRunes int, comment ...string) error {
	if chunkRunes <= 0 {
		chunkRunes = 32
	}
	// Every piece of the chunks is a piece of body: one line, so are they.
	root := gjson.ParseBytes(oneLine(body))
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
	var choices []*choiceStream
	root.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		choices = append(choices, newChoiceStream(ch))
		return true
	})
	d := make([]byte, 0, 256)
	for open := len(choices); open > 0; {
		open = 0
		for _, cs := range choices {
			if cs.done {
				continue
			}
			var finish gjson.Result
			d, finish = cs.next(d[:0], chunkRunes)
			if err := emit(cs.index, d, finish); err != nil {
				return err
			}
			if !cs.done {
				open++
			}
		}
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

// The phases of one choice's events, in order.
const (
	phaseRole = iota
	phaseReasoning
	phaseContent
	phaseTools
	phaseFinish
)

// choiceStream walks the chunk events of one choice of a chat.completion.
type choiceStream struct {
	index int64
	ch    gjson.Result // the choice
	msg   gjson.Result // its message
	calls []gjson.Result
	phase int
	text  string // what is left of the text being sent in pieces
	call  int    // the tool call being sent
	head  bool   // the tool call's first delta went out
	done  bool
}

func newChoiceStream(ch gjson.Result) *choiceStream {
	cs := &choiceStream{index: ch.Get("index").Int(), ch: ch, msg: ch.Get("message")}
	if tc := cs.msg.Get("tool_calls"); tc.IsArray() {
		cs.calls = tc.Array()
	}
	return cs
}

// next appends the choice's next delta to d and returns it with its finish_reason
// (absent but on the last event).
func (cs *choiceStream) next(d []byte, chunkRunes int) ([]byte, gjson.Result) {
	var none gjson.Result
	for {
		switch cs.phase {
		case phaseRole:
			cs.phase, cs.text = phaseReasoning, cs.msg.Get("reasoning_content").String()
			return cs.roleDelta(d), none
		case phaseReasoning, phaseContent:
			if cs.text != "" {
				field := "content"
				if cs.phase == phaseReasoning {
					field = "reasoning_content"
				}
				piece := runePrefix(cs.text, chunkRunes)
				cs.text = cs.text[len(piece):]
				d = append(d, `{"`...)
				d = append(d, field...)
				d = append(d, `":`...)
				d = rawjson.AppendString(d, piece)
				return append(d, '}'), none
			}
			if cs.phase == phaseReasoning {
				cs.phase, cs.text = phaseContent, cs.msg.Get("content").String()
			} else {
				cs.phase = phaseTools
			}
		case phaseTools:
			if cs.call >= len(cs.calls) {
				cs.phase = phaseFinish
				continue
			}
			call := cs.calls[cs.call]
			if !cs.head {
				cs.head, cs.text = true, call.Get("function.arguments").String()
				return appendToolCallHead(d, cs.call, call), none
			}
			if cs.text != "" {
				piece := runePrefix(cs.text, chunkRunes)
				cs.text = cs.text[len(piece):]
				d = append(d, `{"tool_calls":[{"index":`...)
				d = strconv.AppendInt(d, int64(cs.call), 10)
				d = append(d, `,"function":{"arguments":`...)
				d = rawjson.AppendString(d, piece)
				return append(d, "}}]}"...), none
			}
			cs.call, cs.head = cs.call+1, false
		default:
			cs.done = true
			fin := cs.ch.Get("finish_reason")
			if !fin.Exists() || fin.Type == gjson.Null {
				fin = gjson.Parse(`"stop"`)
			}
			return append(d, "{}"...), fin
		}
	}
}

// roleDelta appends the choice's first delta: the role, an empty content (null
// when the message's content is null, as a tool-calling answer's is) and the
// message's fields factgate does not know, as they came.
func (cs *choiceStream) roleDelta(d []byte) []byte {
	role := cs.msg.Get("role").Str
	if role == "" {
		role = "assistant"
	}
	d = append(d, `{"role":`...)
	d = rawjson.AppendString(d, role)
	if c := cs.msg.Get("content"); c.Type == gjson.Null && c.Exists() {
		d = append(d, `,"content":null`...)
	} else {
		d = append(d, `,"content":""`...)
	}
	cs.msg.ForEach(func(k, v gjson.Result) bool {
		if !messageFields[k.Str] {
			d = append(d, ',')
			d = append(d, k.Raw...)
			d = append(d, ':')
			d = append(d, v.Raw...)
		}
		return true
	})
	return append(d, '}')
}

// appendToolCallHead appends the first delta of tool call i: its index, id, type,
// the function's name with empty arguments, and the call's other fields as they
// came; the arguments follow in pieces.
func appendToolCallHead(d []byte, i int, call gjson.Result) []byte {
	d = append(d, `{"tool_calls":[{"index":`...)
	d = strconv.AppendInt(d, int64(i), 10)
	call.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "index":
		case "function":
			d = append(d, `,"function":{`...)
			n := 0
			v.ForEach(func(fk, fv gjson.Result) bool {
				if fk.Str == "arguments" {
					return true
				}
				if n > 0 {
					d = append(d, ',')
				}
				n++
				d = append(d, fk.Raw...)
				d = append(d, ':')
				d = append(d, fv.Raw...)
				return true
			})
			if n > 0 {
				d = append(d, ',')
			}
			d = append(d, `"arguments":""}`...)
		default:
			d = append(d, ',')
			d = append(d, k.Raw...)
			d = append(d, ':')
			d = append(d, v.Raw...)
		}
		return true
	})
	return append(d, "}]}"...)
}

// writeStreamError ends a stream whose headers are already sent with an error
// event carrying the OpenAI error envelope, then [DONE].
func writeStreamError(w *bufio.Writer, envelope []byte) error {
	if _, err := w.WriteString("data: "); err != nil {
		return err
	}
	_, _ = w.Write(oneLine(envelope))
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
