package proxy

import (
	"bufio"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// responsesEvents writes the server-sent events of the Responses API: each event an
// "event:" line naming its type and a "data:" line whose object carries the type
// and the sequence_number (counted from 0), as OpenAI streams them.
type responsesEvents struct {
	w   *bufio.Writer
	seq int64
	buf []byte
}

// emit writes one event; fill appends the object's members after type and
// sequence_number, each with its leading comma.
func (e *responsesEvents) emit(typ string, fill func(b []byte) []byte) error {
	b := append(e.buf[:0], "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, e.seq, 10)
	e.seq++
	b = fill(b)
	b = append(b, "}\n\n"...)
	e.buf = b
	_, err := e.w.Write(b)
	return err
}

// appendItemAt appends the members locating an event in the output: item_id, output_index.
func appendItemAt(b []byte, item gjson.Result, index int) []byte {
	b = append(b, `,"item_id":`...)
	b = append(b, rawOr(item.Get("id"), `""`)...)
	b = append(b, `,"output_index":`...)
	return strconv.AppendInt(b, int64(index), 10)
}

// appendMember appends ,"name":raw to an object being written.
func appendMember(b []byte, name, raw string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return append(b, raw...)
}

// appendMemberInt appends ,"name":n to an object being written.
func appendMemberInt(b []byte, name string, n int) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, int64(n), 10)
}

// writeResponsesStream writes a complete Responses object as the event stream a
// streaming client of POST /v1/responses expects: response.created and
// response.in_progress (the response in progress, no output yet), then per output
// item its events — a message's content parts with the text in output_text.delta
// pieces of chunkRunes characters (a refusal in refusal.delta pieces), a function
// call's arguments in function_call_arguments.delta pieces, a reasoning item's
// summaries in reasoning_summary_text.delta pieces, any other item added and done
// whole — and last response.completed (response.incomplete or response.failed, by
// the status) with the whole object. The text is the non-streamed answer's.
//
// comment, when not empty, is sent as SSE comment lines just before the terminal
// event (clients ignore comments): the held stream's way to tell what response
// headers could not.
func writeResponsesStream(w *bufio.Writer, obj []byte, chunkRunes int, comment ...string) error {
	if chunkRunes <= 0 {
		chunkRunes = 32
	}
	e := &responsesEvents{w: w, buf: make([]byte, 0, 512)}
	// Every event carries a piece of obj, or all of it: one line, so are they.
	obj = oneLine(obj)
	root := gjson.ParseBytes(obj)
	start := obj
	for _, f := range [...]struct{ path, raw string }{
		{"status", `"in_progress"`}, {"output", "[]"}, {"usage", "null"}, {"incomplete_details", "null"},
	} {
		if b, err := sjson.SetRawBytes(start, f.path, []byte(f.raw)); err == nil {
			start = b
		}
	}
	if root.Get("completed_at").Exists() {
		start, _ = sjson.SetRawBytes(start, "completed_at", []byte("null"))
	}
	withResponse := func(r []byte) func([]byte) []byte {
		return func(b []byte) []byte { return appendMember(b, "response", string(r)) }
	}
	if err := e.emit("response.created", withResponse(start)); err != nil {
		return err
	}
	if err := e.emit("response.in_progress", withResponse(start)); err != nil {
		return err
	}
	var err error
	i := 0
	root.Get("output").ForEach(func(_, item gjson.Result) bool {
		err = e.item(item, i, chunkRunes)
		i++
		return err == nil
	})
	if err != nil {
		return err
	}
	for _, c := range comment {
		_, _ = w.WriteString(": ")
		_, _ = w.WriteString(c)
		_, _ = w.WriteString("\n")
	}
	if len(comment) > 0 {
		_ = w.WriteByte('\n')
	}
	terminal := "response.completed"
	switch root.Get("status").Str {
	case "incomplete":
		terminal = "response.incomplete"
	case "failed":
		terminal = "response.failed"
	}
	if err := e.emit(terminal, withResponse(obj)); err != nil {
		return err
	}
	return w.Flush()
}

// item writes the events of output item index.
func (e *responsesEvents) item(item gjson.Result, index int, chunkRunes int) error {
	added := func(raw string) error {
		return e.emit("response.output_item.added", func(b []byte) []byte {
			b = appendMemberInt(b, "output_index", index)
			return appendMember(b, "item", raw)
		})
	}
	done := func() error {
		return e.emit("response.output_item.done", func(b []byte) []byte {
			b = appendMemberInt(b, "output_index", index)
			return appendMember(b, "item", item.Raw)
		})
	}
	// pieces sends text in deltas of chunkRunes characters.
	pieces := func(typ, text string, fill func(b []byte) []byte) error {
		for text != "" {
			piece := runePrefix(text, chunkRunes)
			text = text[len(piece):]
			if err := e.emit(typ, func(b []byte) []byte {
				b = fill(b)
				b = append(b, `,"delta":`...)
				return rawjson.AppendString(b, piece)
			}); err != nil {
				return err
			}
		}
		return nil
	}
	switch item.Get("type").Str {
	case "message":
		if err := added(inProgress(item, "content", "[]")); err != nil {
			return err
		}
		j := 0
		var err error
		item.Get("content").ForEach(func(_, part gjson.Result) bool {
			err = e.part(item, index, j, part, pieces)
			j++
			return err == nil
		})
		if err != nil {
			return err
		}
	case "function_call":
		if err := added(inProgress(item, "arguments", `""`)); err != nil {
			return err
		}
		args := item.Get("arguments").String()
		if err := pieces("response.function_call_arguments.delta", args, func(b []byte) []byte { return appendItemAt(b, item, index) }); err != nil {
			return err
		}
		if err := e.emit("response.function_call_arguments.done", func(b []byte) []byte {
			b = appendItemAt(b, item, index)
			b = appendMember(b, "name", rawOr(item.Get("name"), `""`))
			return appendMember(b, "arguments", rawOr(item.Get("arguments"), `""`))
		}); err != nil {
			return err
		}
	case "reasoning":
		if err := added(inProgress(item, "summary", "[]")); err != nil {
			return err
		}
		k := 0
		var err error
		item.Get("summary").ForEach(func(_, s gjson.Result) bool {
			err = e.summary(item, index, k, s, pieces)
			k++
			return err == nil
		})
		if err != nil {
			return err
		}
	default:
		if err := added(item.Raw); err != nil {
			return err
		}
	}
	return done()
}

// part writes the events of content part j of a message item.
func (e *responsesEvents) part(item gjson.Result, index, j int, part gjson.Result, pieces func(string, string, func([]byte) []byte) error) error {
	loc := func(b []byte) []byte {
		b = appendItemAt(b, item, index)
		return appendMemberInt(b, "content_index", j)
	}
	partEvent := func(typ, raw string) error {
		return e.emit(typ, func(b []byte) []byte { return appendMember(loc(b), "part", raw) })
	}
	switch part.Get("type").Str {
	case "output_text":
		empty := part.Raw
		for _, f := range [...]struct{ path, raw string }{{"text", `""`}, {"annotations", "[]"}, {"logprobs", "[]"}} {
			if f.path == "text" || part.Get(f.path).Exists() {
				if b, err := sjson.SetRaw(empty, f.path, f.raw); err == nil {
					empty = b
				}
			}
		}
		if err := partEvent("response.content_part.added", empty); err != nil {
			return err
		}
		if err := pieces("response.output_text.delta", part.Get("text").String(), func(b []byte) []byte {
			return append(loc(b), `,"logprobs":[]`...)
		}); err != nil {
			return err
		}
		if err := e.emit("response.output_text.done", func(b []byte) []byte {
			b = loc(b)
			b = appendMember(b, "text", rawOr(part.Get("text"), `""`))
			return appendMember(b, "logprobs", rawOr(part.Get("logprobs"), "[]"))
		}); err != nil {
			return err
		}
	case "refusal":
		if err := partEvent("response.content_part.added", `{"type":"refusal","refusal":""}`); err != nil {
			return err
		}
		if err := pieces("response.refusal.delta", part.Get("refusal").String(), loc); err != nil {
			return err
		}
		if err := e.emit("response.refusal.done", func(b []byte) []byte {
			return appendMember(loc(b), "refusal", rawOr(part.Get("refusal"), `""`))
		}); err != nil {
			return err
		}
	default:
		if err := partEvent("response.content_part.added", part.Raw); err != nil {
			return err
		}
	}
	return partEvent("response.content_part.done", part.Raw)
}

// summary writes the events of summary part k of a reasoning item.
func (e *responsesEvents) summary(item gjson.Result, index, k int, s gjson.Result, pieces func(string, string, func([]byte) []byte) error) error {
	loc := func(b []byte) []byte {
		b = appendItemAt(b, item, index)
		return appendMemberInt(b, "summary_index", k)
	}
	if err := e.emit("response.reasoning_summary_part.added", func(b []byte) []byte {
		return appendMember(loc(b), "part", `{"type":"summary_text","text":""}`)
	}); err != nil {
		return err
	}
	if err := pieces("response.reasoning_summary_text.delta", s.Get("text").String(), loc); err != nil {
		return err
	}
	if err := e.emit("response.reasoning_summary_text.done", func(b []byte) []byte {
		return appendMember(loc(b), "text", rawOr(s.Get("text"), `""`))
	}); err != nil {
		return err
	}
	return e.emit("response.reasoning_summary_part.done", func(b []byte) []byte {
		return appendMember(loc(b), "part", s.Raw)
	})
}

// inProgress is an item as it starts: its field emptied (content, arguments,
// summary) and, when it has a status, "in_progress".
func inProgress(item gjson.Result, field, empty string) string {
	raw := item.Raw
	if b, err := sjson.SetRaw(raw, field, empty); err == nil {
		raw = b
	}
	if item.Get("status").Exists() {
		if b, err := sjson.SetRaw(raw, "status", `"in_progress"`); err == nil {
			raw = b
		}
	}
	return raw
}

// writeResponsesStreamError ends a Responses stream whose headers are already sent
// with an "error" event: the Responses API's error event (code, message, param),
// which also carries the OpenAI error object under "error" so that the SDKs raise
// it (they treat any event whose data has an "error" member as a failure).
func writeResponsesStreamError(w *bufio.Writer, envelope []byte) error {
	e := &responsesEvents{w: w}
	errObj := gjson.GetBytes(oneLine(envelope), "error")
	if !errObj.IsObject() {
		errObj = gjson.Parse(`{"message":"the upstream failed","type":"upstream_error","param":null,"code":null}`)
	}
	if err := e.emit("error", func(b []byte) []byte {
		b = appendMember(b, "code", rawOr(errObj.Get("code"), "null"))
		b = appendMember(b, "message", rawOr(errObj.Get("message"), `""`))
		b = appendMember(b, "param", rawOr(errObj.Get("param"), "null"))
		return appendMember(b, "error", errObj.Raw)
	}); err != nil {
		return err
	}
	return w.Flush()
}
