package proxy

import (
	"context"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// responsesCaller is the Exchange's Upstream for a Responses request on an
// upstream that serves /v1/responses itself (api: responses). The chain sends
// chat completion bodies; those that continue the client's conversation — the
// draft, and the hidden revisions and repairs built from it — go upstream as the
// client's own Responses request, edited in place with what the chain changed
// (responsesRequestFor), and their Responses answers come back to the chain as
// chat completions. Any other body (an LLM-backed validator's judge call) goes as
// the chat completion it is, exactly as on a chat request of the same route.
type responsesCaller struct {
	inner *routeCaller
	rx    *responsesExchange
	ex    *interceptors.Exchange
	// liveRequest is the request a live relay sends (canStreamLive builds it).
	liveRequest []byte
}

// Complete implements interceptors.Upstream.
func (c *responsesCaller) Complete(ctx context.Context, body []byte) (*interceptors.Response, error) {
	req, hidden, ok := c.rx.requestFor(c.ex.Body, body, false)
	if !ok {
		return c.inner.Complete(ctx, body)
	}
	resp, err := c.inner.completeAt(ctx, responsesPath, req)
	if err != nil || !resp.OK() || c.inner.s.checkAnswer(resp.Body) != nil {
		return resp, err
	}
	raw := resp.Body
	resp.Body = responseToChat(raw)
	if !hidden {
		c.rx.setDraft(raw, resp.Body)
	}
	return resp, nil
}

// requestFor builds the Responses request for a chat body the chain sends: base is
// the chain's outgoing chat request (after the request phases), body the call's.
// ok is false when body does not continue base's conversation (its messages do not
// start with base's). hidden reports a call with turns of its own appended (a
// revision or a repair): it is sent with store false, so that the provider keeps
// no hidden call as a response of the client's.
//
// The client's request is edited in place, so that every field factgate does not
// know reaches the upstream byte for byte:
//   - when the request phases changed the system messages (injection), instructions
//     become the text of base's system messages and the input loses its system and
//     developer message items (merged into them, or replaced, as system_message
//     says);
//   - the turns appended to base become input message items;
//   - top-level fields the chain set or removed (the model after upstream_model, an
//     A/B variant's temperature or max_tokens, metadata without factgate's keys) are
//     set or removed under their Responses names;
//   - stream is false (the answer is held) and stream_options removed, unless
//     stream (the answer is relayed live): then they stay as the client sent them.
func (rx *responsesExchange) requestFor(base, body []byte, stream bool) (out []byte, hidden, ok bool) {
	// Views, not copies: the messages carry the operation log and the prompt.
	baseMsgs, msgs := gjson.Get(bytesView(base), "messages"), gjson.Get(bytesView(body), "messages")
	if !baseMsgs.IsArray() || !msgs.IsArray() || len(baseMsgs.Raw) < 3 {
		return nil, false, false
	}
	// The chain appends turns with sjson, which leaves the bytes before them as
	// they are.
	prefix := strings.TrimRight(baseMsgs.Raw[:len(baseMsgs.Raw)-1], " \t\r\n")
	if !strings.HasPrefix(msgs.Raw, prefix) {
		return nil, false, false
	}
	out = append([]byte(nil), rx.request...)
	out = rx.applyFieldEdits(out, body)
	if baseMsgs.Raw != gjson.Get(bytesView(rx.chat0), "messages").Raw {
		out = rx.applySystemPrompt(out, baseMsgs)
	}
	n := len(baseMsgs.Array())
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		if i >= n {
			hidden = true
			out = appendInputTurn(out, m)
		}
		i++
		return true
	})
	if !stream && gjson.GetBytes(out, "stream").Exists() {
		out, _ = sjson.SetRawBytes(out, "stream", []byte("false"))
	}
	if !stream && gjson.GetBytes(out, "stream_options").Exists() {
		out, _ = sjson.DeleteBytes(out, "stream_options")
	}
	if hidden {
		out, _ = sjson.SetRawBytes(out, "store", []byte("false"))
	}
	return out, hidden, true
}

// applyFieldEdits carries the top-level fields the chain changed between the
// translated request (rx.chat0) and body onto the Responses request out.
func (rx *responsesExchange) applyFieldEdits(out, body []byte) []byte {
	before := map[string]string{}
	eachRawMember(bytesView(rx.chat0), func(k, raw string) bool {
		before[k] = raw
		return true
	})
	eachRawMember(bytesView(body), func(k, raw string) bool {
		was, had := before[k]
		delete(before, k)
		if !had || was != raw {
			out = setResponsesField(out, rawString(`"`+k+`"`), raw)
		}
		return true
	})
	for k := range before {
		out = setResponsesField(out, rawString(`"`+k+`"`), "")
	}
	return out
}

// setResponsesField sets to raw (or, for raw "", removes) the Responses field that
// a chat completion field maps onto.
func setResponsesField(out []byte, key string, raw string) []byte {
	path := ""
	switch key {
	case "messages", "stream", "stream_options", "n", "tools", "tool_choice":
		// The conversation and streaming are handled apart; the chain never edits
		// the tools.
		return out
	case "max_tokens", "max_completion_tokens":
		path = "max_output_tokens"
	case "reasoning_effort":
		path = "reasoning.effort"
	case "verbosity":
		path = "text.verbosity"
	case "response_format":
		path = "text.format"
		if raw != "" {
			raw = responsesFormat(gjson.Parse(raw))
		}
	default:
		path = gjson.Escape(key)
	}
	var err error
	var b []byte
	if raw != "" {
		b, err = sjson.SetRawBytes(out, path, []byte(raw))
	} else {
		b, err = sjson.DeleteBytes(out, path)
	}
	if err != nil {
		return out
	}
	return b
}

// responsesFormat renders a chat response_format as a Responses text.format.
func responsesFormat(rf gjson.Result) string {
	if rf.Get("type").Str != "json_schema" {
		return `{"type":` + rawOr(rf.Get("type"), `"text"`) + `}`
	}
	b := []byte(`{"type":"json_schema"`)
	rf.Get("json_schema").ForEach(func(k, v gjson.Result) bool {
		b = append(b, ',')
		b = append(b, k.Raw...)
		b = append(b, ':')
		b = append(b, v.Raw...)
		return true
	})
	return string(append(b, '}'))
}

// applySystemPrompt makes the system messages of base (the injected prompt, with
// the client's instructions merged into it as system_message says) the request's
// instructions, and removes the input's system and developer message items, which
// are in them (merge) or were replaced.
func (rx *responsesExchange) applySystemPrompt(out []byte, baseMsgs gjson.Result) []byte {
	var parts []string // raw contents
	eachRawElement(baseMsgs.Raw, func(_ int, raw string) bool {
		if m := readItem(raw); m.role == `"system"` || m.role == `"developer"` {
			parts = append(parts, m.content)
		}
		return true
	})
	if len(parts) == 1 && isRawString(parts[0]) {
		// The injected prompt as it is: no decoding and encoding again.
		if b, err := sjson.SetRawBytes(out, "instructions", []byte(parts[0])); err == nil {
			out = b
		}
	} else {
		texts := make([]string, 0, len(parts))
		for _, c := range parts {
			if t := messageText(gjson.Parse(c)); t != "" {
				texts = append(texts, t)
			}
		}
		if b, err := sjson.SetBytes(out, "instructions", strings.Join(texts, "\n\n")); err == nil {
			out = b
		}
	}
	input := gjson.Get(bytesView(out), "input")
	if !input.IsArray() {
		return out
	}
	var drop []int
	eachRawElement(input.Raw, func(i int, raw string) bool {
		it := readItem(raw)
		if (it.role == `"system"` || it.role == `"developer"`) && (it.typ == "" || it.typ == `"message"`) {
			drop = append(drop, i)
		}
		return true
	})
	for k := len(drop) - 1; k >= 0; k-- {
		if b, err := sjson.DeleteBytes(out, "input."+strconv.Itoa(drop[k])); err == nil {
			out = b
		}
	}
	return out
}

// appendInputTurn appends a chat message (an assistant draft, a revision request's
// user turn) to the request's input as a message item. A string input becomes the
// user message it stands for, first.
func appendInputTurn(out []byte, m gjson.Result) []byte {
	if in := rawMemberOf(bytesView(out), "input"); isRawString(in) {
		item := append([]byte(`[{"role":"user","content":`), in...)
		if b, err := sjson.SetRawBytes(out, "input", append(item, "}]"...)); err == nil {
			out = b
		}
	}
	item := []byte(`{"role":`)
	item = append(item, rawOr(m.Get("role"), `"user"`)...)
	item = append(item, `,"content":`...)
	if c := m.Get("content"); c.Type == gjson.String {
		item = append(item, c.Raw...)
	} else {
		item = rawjson.AppendString(item, messageText(c))
	}
	item = append(item, '}')
	if b, err := sjson.SetRawBytes(out, "input.-1", item); err == nil {
		out = b
	}
	return out
}

// messageText is a chat message content's text: the string, or its text parts
// joined with a newline.
func messageText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	c.ForEach(func(_, p gjson.Result) bool {
		if p.Get("type").Str == "text" {
			parts = append(parts, p.Get("text").Str)
		}
		return true
	})
	return strings.Join(parts, "\n")
}

// Interface guard.
var _ interceptors.Upstream = (*responsesCaller)(nil)
