package proxy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// responseStatus maps a chat finish_reason onto a Responses status and its
// incomplete_details (raw JSON).
func responseStatus(finish string) (status, incomplete string) {
	switch finish {
	case "length":
		return "incomplete", `{"reason":"max_output_tokens"}`
	case "content_filter":
		return "incomplete", `{"reason":"content_filter"}`
	}
	return "completed", "null"
}

// responseEcho are the request's settings a response object repeats, with the
// value it says when the request does not set one (the Responses API's defaults).
var responseEcho = [...]struct{ name, or string }{
	{"instructions", "null"}, {"max_output_tokens", "null"}, {"parallel_tool_calls", "true"},
	{"reasoning", `{"effort":null,"summary":null}`}, {"temperature", "1"}, {"text", `{"format":{"type":"text"}}`},
	{"tool_choice", `"auto"`}, {"tools", "[]"}, {"top_p", "1"}, {"user", "null"},
}

// chatToResponse renders a chat.completion (the chain's final answer, usage summed)
// as the Responses object a client of POST /v1/responses expects: the reasoning as
// a reasoning item with one summary, the content as a message item with one
// output_text part (a refusal as a refusal part), each tool call as a
// function_call item; status and incomplete_details from the finish reason; usage
// as input/output tokens; access_programs null (no program asked for or used). The request's own settings (instructions, tools, text,
// …) are echoed as the Responses API echoes them, never the prompt factgate
// injected; outgoing is the chat request that went upstream (its metadata is the
// client's without factgate's keys). Unknown top-level fields of the chat answer
// (provider extensions) are carried over as they came.
func chatToResponse(chat, request, outgoing []byte) []byte {
	return appendChatResponse(nil, chat, request, outgoing)
}

// appendChatResponse is chatToResponse appending to dst.
func appendChatResponse(dst, chat, request, outgoing []byte) []byte {
	// A view, not a copy: what is read from it is appended to the object at once.
	root := gjson.Parse(bytesView(chat))
	// The request's settings, found in one scan: its input may be long.
	var echo [len(responseEcho)]string
	eachRawMember(bytesView(request), func(k, raw string) bool {
		for i, e := range responseEcho {
			if k == e.name && echo[i] == "" {
				echo[i] = raw
			}
		}
		return true
	})
	req := func(name string) string {
		for i, e := range responseEcho {
			if e.name == name {
				return rawOrEmpty(echo[i], e.or)
			}
		}
		return "null"
	}
	id := root.Get("id").String()
	if id == "" {
		id = "factgate"
	}
	ch := root.Get("choices.0")
	msg := ch.Get("message")
	status, incomplete := responseStatus(ch.Get("finish_reason").Str)

	b := slices.Grow(dst, len(chat)+len(request)/4+512)
	b = append(b, `{"id":`...)
	b = rawjson.AppendString(b, "resp_"+id)
	// access_programs: null is the implicit Standard program (openai-go's
	// ResponseNewParamsAccessPrograms says so): the request names none, a chat
	// upstream has none to name.
	b = append(b, `,"object":"response","access_programs":null,"created_at":`...)
	b = strconv.AppendInt(b, root.Get("created").Int(), 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","background":false,"error":null,"incomplete_details":`...)
	b = append(b, incomplete...)
	b = append(b, `,"instructions":`...)
	b = append(b, req("instructions")...)
	b = append(b, `,"max_output_tokens":`...)
	b = append(b, req("max_output_tokens")...)
	b = append(b, `,"metadata":`...)
	b = append(b, rawOr(gjson.Get(bytesView(outgoing), "metadata"), "{}")...)
	b = append(b, `,"model":`...)
	b = append(b, rawOr(root.Get("model"), `""`)...)
	b = append(b, `,"output":[`...)
	b = appendOutputItems(b, id, msg, status)
	b = append(b, `],"parallel_tool_calls":`...)
	b = append(b, req("parallel_tool_calls")...)
	b = append(b, `,"previous_response_id":null,"reasoning":`...)
	b = append(b, req("reasoning")...)
	if st := root.Get("service_tier"); st.Exists() {
		b = append(b, `,"service_tier":`...)
		b = append(b, st.Raw...)
	}
	b = append(b, `,"store":false,"temperature":`...)
	b = append(b, req("temperature")...)
	b = append(b, `,"text":`...)
	b = append(b, req("text")...)
	b = append(b, `,"tool_choice":`...)
	b = append(b, req("tool_choice")...)
	b = append(b, `,"tools":`...)
	b = appendEchoedTools(b, req("tools"))
	b = append(b, `,"top_p":`...)
	b = append(b, req("top_p")...)
	b = append(b, `,"truncation":"disabled","usage":`...)
	b = appendResponseUsage(b, root.Get("usage"))
	b = append(b, `,"user":`...)
	b = append(b, req("user")...)
	root.ForEach(func(k, v gjson.Result) bool {
		if !completionFields[k.Str] {
			b = append(b, ',')
			b = append(b, k.Raw...)
			b = append(b, ':')
			b = append(b, v.Raw...)
		}
		return true
	})
	return append(b, '}')
}

// appendOutputItems appends the output items of a chat message.
func appendOutputItems(b []byte, id string, msg gjson.Result, status string) []byte {
	// The message's members in one scan, undecoded: the content can be long.
	var rc, content, refusal, toolCalls string
	eachRawMember(msg.Raw, func(k, raw string) bool {
		switch k {
		case "reasoning_content":
			rc = raw
		case "content":
			content = raw
		case "refusal":
			refusal = raw
		case "tool_calls":
			toolCalls = raw
		}
		return true
	})
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	if isRawString(rc) && rc != `""` {
		sep()
		b = append(b, `{"id":`...)
		b = rawjson.AppendString(b, "rs_"+id)
		b = append(b, `,"type":"reasoning","summary":[{"type":"summary_text","text":`...)
		b = append(b, rc...)
		b = append(b, "}]}"...)
	}
	calls := gjson.Parse(toolCalls)
	hasCalls := calls.IsArray() && len(calls.Array()) > 0
	hasRefusal := isRawString(refusal)
	// An empty content next to tool calls is no message; an answer with nothing at
	// all is an empty one.
	textPart := (!hasRefusal && !hasCalls) || (isRawString(content) && content != `""`)
	if textPart || hasRefusal {
		sep()
		msgStatus := "completed"
		if status == "incomplete" {
			msgStatus = "incomplete"
		}
		b = append(b, `{"id":`...)
		b = rawjson.AppendString(b, "msg_"+id)
		b = append(b, `,"type":"message","status":"`...)
		b = append(b, msgStatus...)
		b = append(b, `","role":"assistant","content":[`...)
		if textPart {
			b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
			if isRawString(content) {
				b = append(b, content...)
			} else {
				b = append(b, `""`...)
			}
			b = append(b, '}')
		}
		if hasRefusal {
			if textPart {
				b = append(b, ',')
			}
			b = append(b, `{"type":"refusal","refusal":`...)
			b = append(b, refusal...)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	calls.ForEach(func(_, c gjson.Result) bool {
		sep()
		callID := c.Get("id").String()
		b = append(b, `{"id":`...)
		b = rawjson.AppendString(b, "fc_"+callID)
		b = append(b, `,"type":"function_call","status":"completed","arguments":`...)
		b = append(b, rawOr(c.Get("function.arguments"), `""`)...)
		b = append(b, `,"call_id":`...)
		b = rawjson.AppendString(b, callID)
		b = append(b, `,"name":`...)
		b = append(b, rawOr(c.Get("function.name"), `""`)...)
		b = append(b, '}')
		return true
	})
	return b
}

// appendResponseUsage appends a chat usage object as Responses usage: input and
// output tokens with their details (cached, cache-write and reasoning tokens, 0
// when the upstream does not say).
func appendResponseUsage(b []byte, u gjson.Result) []byte {
	if !u.IsObject() {
		return append(b, "null"...)
	}
	in, out := u.Get("prompt_tokens").Int(), u.Get("completion_tokens").Int()
	total := u.Get("total_tokens").Int()
	if total == 0 {
		total = in + out
	}
	cached := u.Get("prompt_tokens_details.cached_tokens").Int()
	if cached == 0 {
		cached = u.Get("prompt_cache_hit_tokens").Int() // DeepSeek
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, in, 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, cached, 10)
	b = append(b, `,"cache_write_tokens":`...)
	b = strconv.AppendInt(b, u.Get("prompt_tokens_details.cache_write_tokens").Int(), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, out, 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, u.Get("completion_tokens_details.reasoning_tokens").Int(), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, total, 10)
	return append(b, '}')
}

// appendEchoedTools appends the request's tools as a response echoes them: a
// function tool with every member the Responses API's FunctionTool requires —
// "strict" (false when the request left it out: the chat tool it became asks
// the upstream for no strict mode) and "parameters" (null when left out) — the
// request's own members first, as they came. Anything else is echoed unchanged.
func appendEchoedTools(b []byte, tools string) []byte {
	arr := gjson.Parse(tools)
	if !arr.IsArray() {
		return append(b, tools...)
	}
	b = append(b, '[')
	n := 0
	arr.ForEach(func(_, tool gjson.Result) bool {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		if !tool.IsObject() || tool.Get("type").Str != "function" {
			b = append(b, tool.Raw...)
			return true
		}
		strict, params := tool.Get("strict"), tool.Get("parameters")
		b = append(b, '{')
		m := 0
		tool.ForEach(func(k, v gjson.Result) bool {
			if k.Str == "strict" && v.Type == gjson.Null {
				return true // said below
			}
			if m > 0 {
				b = append(b, ',')
			}
			m++
			b = append(b, k.Raw...)
			b = append(b, ':')
			b = append(b, v.Raw...)
			return true
		})
		if !params.Exists() {
			b = append(b, `,"parameters":null`...)
		}
		if strict.Type != gjson.True && strict.Type != gjson.False {
			b = append(b, `,"strict":false`...)
		}
		b = append(b, '}')
		return true
	})
	return append(b, ']')
}

// responseToChat renders a Responses object (an api: responses upstream's answer)
// as the chat.completion the chain works on: the output_text of every message item
// joined as the content, the reasoning summaries as reasoning_content, function
// calls as tool_calls, the status as the finish reason, input/output tokens as
// usage. An object without output items gives no choices (the upstream answered
// nothing).
func responseToChat(obj []byte) []byte {
	root := gjson.ParseBytes(obj)
	var text, reasoning strings.Builder
	var refusal []byte
	var calls []byte
	hasText, items := false, 0
	root.Get("output").ForEach(func(_, item gjson.Result) bool {
		items++
		switch item.Get("type").Str {
		case "message":
			item.Get("content").ForEach(func(_, p gjson.Result) bool {
				switch p.Get("type").Str {
				case "output_text":
					text.WriteString(p.Get("text").Str)
					hasText = true
				case "refusal":
					refusal = rawjson.AppendString(refusal[:0], p.Get("refusal").Str)
				}
				return true
			})
		case "reasoning":
			item.Get("summary").ForEach(func(_, s gjson.Result) bool {
				if reasoning.Len() > 0 {
					reasoning.WriteString("\n\n")
				}
				reasoning.WriteString(s.Get("text").Str)
				return true
			})
		case "function_call":
			if len(calls) > 0 {
				calls = append(calls, ',')
			}
			calls = append(calls, `{"id":`...)
			calls = append(calls, rawOr(item.Get("call_id"), `""`)...)
			calls = append(calls, `,"type":"function","function":{"name":`...)
			calls = append(calls, rawOr(item.Get("name"), `""`)...)
			calls = append(calls, `,"arguments":`...)
			calls = append(calls, rawOr(item.Get("arguments"), `""`)...)
			calls = append(calls, "}}"...)
		}
		return true
	})
	b := make([]byte, 0, text.Len()+reasoning.Len()+len(calls)+256)
	b = append(b, `{"id":`...)
	b = append(b, rawOr(root.Get("id"), `""`)...)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, root.Get("created_at").Int(), 10)
	b = append(b, `,"model":`...)
	b = append(b, rawOr(root.Get("model"), `""`)...)
	b = append(b, `,"choices":[`...)
	if items > 0 {
		b = append(b, `{"index":0,"message":{"role":"assistant","content":`...)
		if !hasText && (len(calls) > 0 || refusal != nil) {
			b = append(b, "null"...)
		} else {
			b = rawjson.AppendString(b, text.String())
		}
		if reasoning.Len() > 0 {
			b = append(b, `,"reasoning_content":`...)
			b = rawjson.AppendString(b, reasoning.String())
		}
		if refusal != nil {
			b = append(b, `,"refusal":`...)
			b = append(b, refusal...)
		}
		if len(calls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			b = append(b, calls...)
			b = append(b, ']')
		}
		b = append(b, `},"finish_reason":"`...)
		switch {
		case root.Get("status").Str == "incomplete" && root.Get("incomplete_details.reason").Str == "content_filter":
			b = append(b, "content_filter"...)
		case root.Get("status").Str == "incomplete":
			b = append(b, "length"...)
		case len(calls) > 0:
			b = append(b, "tool_calls"...)
		default:
			b = append(b, "stop"...)
		}
		b = append(b, `"}`...)
	}
	b = append(b, ']')
	if u := root.Get("usage"); u.IsObject() {
		in, out := u.Get("input_tokens").Int(), u.Get("output_tokens").Int()
		total := u.Get("total_tokens").Int()
		if total == 0 {
			total = in + out
		}
		b = append(b, `,"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, in, 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, out, 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, total, 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// patchResponse returns the upstream's Responses object of the draft (an api:
// responses upstream's answer) carrying the chain's final answer: when the content
// or the finish changed (a revision, a stripped claims block) the first output_text
// part gets the final content and later output_text parts are removed (their
// annotations and log probabilities no longer match the text, so they are
// emptied), and the status follows the final finish reason; usage is summed over
// every call when other calls were made; model is alias when set. Everything else
// — ids, reasoning items, fields factgate does not know — stays as the upstream
// wrote it, and an answer nothing changed is returned byte for byte.
func patchResponse(draft, draftChat, final []byte, alias string) []byte {
	out := draft
	fc, dc := gjson.GetBytes(final, "choices.0"), gjson.GetBytes(draftChat, "choices.0")
	content := fc.Get("message.content")
	if content.Raw != dc.Get("message.content").Raw || fc.Get("finish_reason").Str != dc.Get("finish_reason").Str {
		out = setOutputText(out, content.String())
		status, incomplete := responseStatus(fc.Get("finish_reason").Str)
		out, _ = sjson.SetBytes(out, "status", status)
		out, _ = sjson.SetRawBytes(out, "incomplete_details", []byte(incomplete))
	}
	if fu, du := interceptors.ParseUsage(final), interceptors.ParseUsage(draftChat); fu != du {
		if !gjson.GetBytes(out, "usage").IsObject() {
			out, _ = sjson.SetRawBytes(out, "usage", []byte(`{}`))
		}
		out, _ = sjson.SetBytes(out, "usage.input_tokens", fu.PromptTokens)
		out, _ = sjson.SetBytes(out, "usage.output_tokens", fu.CompletionTokens)
		out, _ = sjson.SetBytes(out, "usage.total_tokens", fu.TotalTokens)
	}
	if alias != "" {
		out, _ = sjson.SetBytes(out, "model", alias)
	}
	return out
}

// setOutputText puts text into the first output_text part of the object's message
// items and removes the later ones; an object without one gets a message item.
func setOutputText(obj []byte, text string) []byte {
	first := ""
	var later []string
	i := 0
	gjson.GetBytes(obj, "output").ForEach(func(_, item gjson.Result) bool {
		if item.Get("type").Str == "message" {
			j := 0
			item.Get("content").ForEach(func(_, p gjson.Result) bool {
				if p.Get("type").Str == "output_text" {
					path := "output." + strconv.Itoa(i) + ".content." + strconv.Itoa(j)
					if first == "" {
						first = path
					} else {
						later = append(later, path)
					}
				}
				j++
				return true
			})
		}
		i++
		return true
	})
	if first == "" {
		item := append([]byte(`{"id":"msg_factgate","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":`), rawjson.AppendString(nil, text)...)
		item = append(item, "}]}"...)
		if b, err := sjson.SetRawBytes(obj, "output.-1", item); err == nil {
			obj = b
		}
		return obj
	}
	// Later parts first: removing one does not move an earlier one.
	for k := len(later) - 1; k >= 0; k-- {
		if b, err := sjson.DeleteBytes(obj, later[k]); err == nil {
			obj = b
		}
	}
	obj, _ = sjson.SetBytes(obj, first+".text", text)
	for _, f := range [...]string{".annotations", ".logprobs"} {
		if gjson.GetBytes(obj, first+f).Exists() {
			obj, _ = sjson.SetRawBytes(obj, first+f, []byte("[]"))
		}
	}
	return obj
}
