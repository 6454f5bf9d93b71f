package proxy

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// The Responses API (POST /v1/responses) reaches a route's chain as a chat
// completion: the interceptors read and edit chat-shaped bodies, so a Responses
// request is translated into one (instructions → a system message, input items →
// messages, function tools → chat tools, text.format → response_format), the chain
// runs on it exactly as on a chat completion, and its final answer is translated
// back into a Responses object (responses_answer.go).
//
// On an upstream that speaks chat completions only (api: chat) the translation is
// what goes upstream, so it is strict: a field it cannot carry is a 400 naming the
// field, never silently dropped. On an upstream that serves /v1/responses itself
// (api: responses) the translation is only the chain's view of the request; the
// client's own Responses request goes upstream, edited in place with what the
// chain changed (responses_upstream.go), so it is lenient: what it cannot express
// is left out of the view and still reaches the upstream byte for byte.

// translateError is a Responses request field the chat translation cannot carry,
// or carries a value of the wrong type.
type translateError struct {
	param, code, msg string
}

// chatMessage is one message of the translated chat request; its values are raw
// JSON taken from the Responses request.
type chatMessage struct {
	role       string
	content    string // raw JSON value; "" = absent
	refusal    string // raw JSON string; "" = absent
	toolCallID string // raw JSON string; "" = absent
	calls      []string
}

// responsesTranslator turns one Responses request into a chat completion request.
type responsesTranslator struct {
	strict   bool
	upstream string // named in errors
	msgs     []chatMessage
	err      *translateError
	// scratch holds the translated content parts until the body is assembled
	// (a pooled buffer: the parts carry the log, copied once more into the body).
	scratch *[]byte
}

// partsScratch pools the translators' scratch buffers.
var partsScratch = sync.Pool{New: func() any { return new([]byte) }}

// release returns the scratch buffer; no message content may be read after it.
func (t *responsesTranslator) release() {
	if t.scratch != nil {
		if cap(*t.scratch) <= 1<<20 {
			*t.scratch = (*t.scratch)[:0]
			partsScratch.Put(t.scratch)
		}
		t.scratch = nil
	}
}

// Top-level Responses request fields with the same name and meaning in chat
// completions: copied as they are.
var responsesSameFields = map[string]bool{
	"temperature": true, "top_p": true, "user": true, "metadata": true, "parallel_tool_calls": true,
	"safety_identifier": true, "prompt_cache_key": true, "service_tier": true, "prompt_cache_retention": true,
	"stream": true,
}

// Responses request fields that need the provider to keep state or run tools
// (stored conversations, prompt templates, hosted tools), which chat completions
// cannot do. Null, false and empty values are accepted as "not used".
var responsesStatefulFields = map[string]string{
	"previous_response_id": "chat completions keep no stored responses: send the whole conversation in input",
	"conversation":         "chat completions keep no conversations: send the whole conversation in input",
	"prompt":               "chat completions have no stored prompt templates",
	"max_tool_calls":       "chat completions run no built-in tools to bound",
	"top_logprobs":         "the translation does not carry log probabilities",
	"include":              "the translation produces none of the extra output it names (only reasoning.encrypted_content is accepted, and there is none to give)",
	"context_management":   "chat completions have no server-side context management",
	"moderation":           "chat completions have no moderation policy parameter",
	"access_programs":      "chat completions have no access programs",
	"image":                "chat completions have no image generation options",
	"prompt_cache_options": "chat completions have no prompt cache options",
	"store":                "chat completions store nothing on the provider: send store: false or leave it out",
	"background":           "chat completions cannot run in the background",
	"truncation":           "chat completions cannot truncate the conversation: only \"disabled\" is carried",
}

// Chat completion fields the translation writes itself: a Responses request
// carrying one is refused (it would collide), as it is not a Responses field.
var responsesReservedFields = map[string]bool{
	"messages": true, "max_tokens": true, "max_completion_tokens": true, "response_format": true,
	"reasoning_effort": true, "verbosity": true, "n": true,
}

// translateResponsesRequest returns the chat completion request for a Responses
// request body (valid JSON). strict: the translation is what goes upstream (api:
// chat), so a field it cannot carry is an error; otherwise such fields are left out
// of the chain's view. Fields that are not Responses API fields (provider
// extensions) are copied as they are.
func translateResponsesRequest(body []byte, strict bool, upstream string) ([]byte, *interceptors.Error) {
	t := &responsesTranslator{strict: strict, upstream: upstream}
	defer t.release() // after the body is assembled: it copies the parts
	root := bytesView(body)
	if r := strings.TrimLeft(root, " \t\r\n"); r == "" || r[0] != '{' {
		return nil, &interceptors.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body must be a JSON object"}
	}
	var model, instructions, input string
	fields := make([]byte, 0, 256)
	add := func(key string, raw string) {
		fields = append(fields, ',')
		fields = rawjson.AppendString(fields, key)
		fields = append(fields, ':')
		fields = append(fields, raw...)
	}
	eachRawMember(root, func(k, raw string) bool {
		key := k
		if strings.IndexByte(k, '\\') >= 0 {
			key = rawString(`"` + k + `"`)
		}
		switch {
		case key == "model":
			model = raw
		case key == "input":
			input = raw
		case key == "instructions":
			instructions = raw
		case key == "stream_options":
			// include_obfuscation shapes the provider's stream; factgate writes the
			// stream itself, without obfuscation.
		case isRawNull(raw):
		case responsesSameFields[key]:
			add(key, raw)
		case key == "max_output_tokens":
			// max_tokens, not max_completion_tokens: the one every OpenAI-compatible
			// server reads.
			add("max_tokens", raw)
		case key == "tools":
			if out := t.tools(gjson.Parse(raw)); out != "" {
				add("tools", out)
			}
		case key == "tool_choice":
			if out := t.toolChoice(gjson.Parse(raw)); out != "" {
				add("tool_choice", out)
			}
		case key == "text":
			t.text(gjson.Parse(raw), add)
		case key == "reasoning":
			t.reasoning(gjson.Parse(raw), add)
		case responsesStatefulFields[key] != "":
			if responsesFieldUsed(key, gjson.Parse(raw)) {
				t.unsupported(key, responsesStatefulFields[key])
			}
		case responsesReservedFields[key]:
			t.fail(key, "unknown_parameter", key+": a chat completions field, not a Responses API field (the translation writes it from the Responses fields)")
		default:
			// Not a Responses field: a provider extension, passed on as it came.
			add(key, raw)
		}
		return t.err == nil
	})
	if t.err == nil {
		switch {
		case isRawString(instructions):
			t.msgs = append(t.msgs, chatMessage{role: "system", content: instructions})
		case instructions != "" && !isRawNull(instructions):
			t.fail("instructions", "invalid_type", "instructions: must be a string")
		}
	}
	if t.err == nil {
		t.input(input)
	}
	if t.err == nil && strict && len(t.msgs) == 0 {
		t.fail("input", "missing_required_parameter", "input: the request has no input (and no instructions)")
	}
	if t.err != nil {
		return nil, &interceptors.Error{Status: 400, Type: "invalid_request_error", Code: t.err.code, Param: t.err.param, Message: t.err.msg}
	}
	out := make([]byte, 0, len(body)+len(fields)+64)
	out = append(out, `{"model":`...)
	if model == "" {
		model = `""`
	}
	out = append(out, model...)
	// The settings before the messages: every lookup of one by the proxy and the
	// interceptors then stops before the long texts.
	out = append(out, fields...)
	out = append(out, `,"messages":[`...)
	for i, m := range t.msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = m.append(out)
	}
	return append(out, "]}"...), nil
}

// responsesFieldUsed reports whether a stateful field's value asks for something
// (null, false, an empty list and truncation "disabled" do not).
func responsesFieldUsed(key string, v gjson.Result) bool {
	switch {
	case v.Type == gjson.Null, v.Type == gjson.False:
		return false
	case key == "include":
		// Encrypted reasoning is what a stateless client of a reasoning model asks
		// for to send the reasoning back; a chat upstream takes no reasoning back,
		// so there is nothing to encrypt and nothing is lost without it.
		used := false
		v.ForEach(func(_, inc gjson.Result) bool {
			used = inc.Str != "reasoning.encrypted_content"
			return !used
		})
		return used
	case v.IsArray():
		return len(v.Array()) > 0
	case key == "truncation":
		return v.Str != "disabled"
	}
	return true
}

// fail records the first error when the translation is strict; the lenient view
// leaves out what it cannot express.
func (t *responsesTranslator) fail(param, code, msg string) {
	if t.err == nil && t.strict {
		t.err = &translateError{param: param, code: code, msg: msg}
	}
}

// unsupported records a field the chat translation cannot carry.
func (t *responsesTranslator) unsupported(param, why string) {
	t.fail(param, "unsupported_parameter", param+": "+why+" (upstream "+strconv.Quote(t.upstream)+
		" speaks chat completions, upstreams."+t.upstream+".api: chat; a Responses-capable upstream takes it with api: responses)")
}

// input translates the input (raw JSON): a string is one user message; an array
// of items gives messages in order.
func (t *responsesTranslator) input(raw string) {
	switch {
	case raw == "" || isRawNull(raw):
	case isRawString(raw):
		t.msgs = append(t.msgs, chatMessage{role: "user", content: raw})
	case isRawArray(raw):
		eachRawElement(raw, func(i int, item string) bool {
			t.item("input["+strconv.Itoa(i)+"]", item)
			return t.err == nil
		})
	default:
		t.fail("input", "invalid_type", "input: must be a string or an array of input items")
	}
}

// item translates one input item (raw JSON).
func (t *responsesTranslator) item(path string, raw string) {
	if raw == "" || raw[0] != '{' {
		t.fail(path, "invalid_type", path+": must be an object")
		return
	}
	f := readItem(raw)
	typ := rawString(f.typ)
	switch {
	case typ == "message" || (f.typ == "" && f.role != ""):
		t.message(path, f)
	case typ == "function_call":
		if !isRawString(f.callID) || !isRawString(f.name) {
			t.fail(path, "invalid_value", path+": a function_call item needs a call_id and a name")
			return
		}
		args := f.arguments
		if args == "" {
			args = `""`
		}
		call := make([]byte, 0, 64+len(args))
		call = append(call, `{"id":`...)
		call = append(call, f.callID...)
		call = append(call, `,"type":"function","function":{"name":`...)
		call = append(call, f.name...)
		call = append(call, `,"arguments":`...)
		call = append(call, args...)
		call = append(call, "}}"...)
		// Chat completions put a turn's calls on one assistant message, followed by
		// the tool results.
		if n := len(t.msgs); n > 0 && t.msgs[n-1].role == "assistant" {
			t.msgs[n-1].calls = append(t.msgs[n-1].calls, string(call))
		} else {
			t.msgs = append(t.msgs, chatMessage{role: "assistant", content: "null", calls: []string{string(call)}})
		}
	case typ == "function_call_output":
		if !isRawString(f.callID) {
			t.fail(path+".call_id", "invalid_value", path+": a function_call_output item needs a call_id")
			return
		}
		content := f.output
		if isRawArray(content) {
			content = t.joinText(path+".output", content)
		} else if !isRawString(content) {
			t.fail(path+".output", "invalid_type", path+".output: must be a string or an array of content parts")
			return
		}
		t.msgs = append(t.msgs, chatMessage{role: "tool", toolCallID: f.callID, content: content})
	case typ == "reasoning":
		// The model's reasoning of an earlier turn: chat completions take no
		// reasoning back (DeepSeek asks that reasoning_content never be sent).
	case typ == "item_reference" || (f.typ == "" && f.id != ""):
		// The type of an item reference is optional.
		t.unsupported(path, "an item_reference names an item the provider stored, which chat completions cannot look up")
	default:
		t.unsupported(path+".type", "an item of type "+strconv.Quote(typ)+", which chat completions cannot carry")
	}
}

// itemFields are the members of an input item the translation reads, as raw
// JSON ("" when absent).
type itemFields struct {
	typ, role, content, callID, name, arguments, output, id string
}

// readItem reads an input item's members in one scan: an item can carry a long
// text, which every lookup by name would scan (and decode) again.
func readItem(item string) (f itemFields) {
	eachRawMember(item, func(k, v string) bool {
		switch k {
		case "type":
			f.typ = v
		case "role":
			f.role = v
		case "content":
			f.content = v
		case "call_id":
			f.callID = v
		case "name":
			f.name = v
		case "arguments":
			f.arguments = v
		case "output":
			f.output = v
		case "id":
			f.id = v
		}
		return true
	})
	return f
}

// partFields are the members of a content part the translation reads, as raw
// JSON ("" when absent).
type partFields struct {
	typ, text, imageURL, detail, fileURL, refusal, inputAudio string
	file                                                      [3]string // file_data, file_id, filename
}

// fileMembers are the members of an input_file part a chat file part carries.
var fileMembers = [3]string{"file_data", "file_id", "filename"}

// readPart reads a content part's members in one scan.
func readPart(p string) (f partFields) {
	eachRawMember(p, func(k, v string) bool {
		switch k {
		case "type":
			f.typ = v
		case "text":
			f.text = v
		case "image_url":
			f.imageURL = v
		case "detail":
			f.detail = v
		case "file_url":
			f.fileURL = v
		case "refusal":
			f.refusal = v
		case "input_audio":
			f.inputAudio = v
		case fileMembers[0]:
			f.file[0] = v
		case fileMembers[1]:
			f.file[1] = v
		case fileMembers[2]:
			f.file[2] = v
		}
		return true
	})
	return f
}

// message translates a message item (or an easy input message).
func (t *responsesTranslator) message(path string, item itemFields) {
	role := rawString(item.role)
	switch role {
	case "user", "system", "assistant":
	case "developer":
		// Chat servers that know no developer role are the rule, not the exception.
		role = "system"
	default:
		t.fail(path+".role", "invalid_value", path+".role: must be user, assistant, system or developer")
		return
	}
	c := item.content
	m := chatMessage{role: role}
	switch {
	case isRawString(c):
		m.content = c
	case isRawArray(c) && role == "assistant":
		m.content, m.refusal = t.assistantContent(path+".content", c)
	case isRawArray(c):
		m.content = t.parts(path+".content", c)
	default:
		t.fail(path+".content", "invalid_type", path+".content: must be a string or an array of content parts")
		return
	}
	t.msgs = append(t.msgs, m)
}

// parts translates the content parts (raw JSON array) of a user or system message.
func (t *responsesTranslator) parts(path string, c string) string {
	if t.scratch == nil {
		t.scratch = partsScratch.Get().(*[]byte)
	}
	start := len(*t.scratch)
	out := slices.Grow(*t.scratch, len(c)+64)
	defer func() { *t.scratch = out }()
	out = append(out, '[')
	eachRawElement(c, func(i int, raw string) bool {
		where := path + "[" + strconv.Itoa(i) + "]"
		p := readPart(raw)
		mark := len(out)
		if mark > start+1 {
			out = append(out, ',')
		}
		switch typ := rawString(p.typ); typ {
		case "input_text", "output_text", "text":
			out = append(out, `{"type":"text","text":`...)
			out = append(out, rawOrEmpty(p.text, `""`)...)
			out = append(out, '}')
		case "input_image":
			if !isRawString(p.imageURL) {
				t.unsupported(where+".file_id", "an image named by an uploaded file, which chat completions cannot fetch: send image_url")
				out = out[:mark]
				return t.err == nil
			}
			out = append(out, `{"type":"image_url","image_url":{"url":`...)
			out = append(out, p.imageURL...)
			if isRawString(p.detail) {
				out = append(out, `,"detail":`...)
				out = append(out, p.detail...)
			}
			out = append(out, "}}"...)
		case "input_file":
			if p.fileURL != "" && !isRawNull(p.fileURL) {
				t.unsupported(where+".file_url", "a file named by URL, which chat completions cannot fetch: send file_data or file_id")
				out = out[:mark]
				return t.err == nil
			}
			out = append(out, `{"type":"file","file":{`...)
			n := 0
			for k, v := range p.file {
				if isRawString(v) {
					if n > 0 {
						out = append(out, ',')
					}
					n++
					out = rawjson.AppendString(out, fileMembers[k])
					out = append(out, ':')
					out = append(out, v...)
				}
			}
			out = append(out, "}}"...)
		case "input_audio":
			out = append(out, `{"type":"input_audio","input_audio":`...)
			out = append(out, rawOrEmpty(p.inputAudio, "{}")...)
			out = append(out, '}')
		default:
			t.unsupported(where+".type", "a content part of type "+strconv.Quote(typ)+", which chat completions cannot carry")
			out = out[:mark]
			return t.err == nil
		}
		return true
	})
	out = append(out, ']')
	// A view into the scratch buffer: an array it outgrows stays alive for the
	// views into it.
	return bytesView(out[start:])
}

// assistantContent translates an assistant message's parts: the text parts joined
// into one string (chat servers commonly take assistant content as a string), a
// refusal part into the message's refusal.
func (t *responsesTranslator) assistantContent(path string, c string) (content, refusal string) {
	var text strings.Builder
	hasText := false
	eachRawElement(c, func(i int, raw string) bool {
		where := path + "[" + strconv.Itoa(i) + "]"
		f := readPart(raw)
		switch typ := rawString(f.typ); typ {
		case "output_text", "input_text", "text":
			text.WriteString(rawString(f.text))
			hasText = true
		case "refusal":
			refusal = rawOrEmpty(f.refusal, `""`)
		default:
			t.unsupported(where+".type", "an assistant content part of type "+strconv.Quote(typ)+", which chat completions cannot carry")
			return t.err == nil
		}
		return true
	})
	if !hasText && refusal != "" {
		return "null", refusal
	}
	return string(rawjson.AppendString(nil, text.String())), refusal
}

// joinText joins the text parts of a function call's output (raw JSON array) into
// one string (a tool message's content); other parts cannot be carried.
func (t *responsesTranslator) joinText(path string, c string) string {
	var text strings.Builder
	eachRawElement(c, func(i int, raw string) bool {
		where := path + "[" + strconv.Itoa(i) + "]"
		f := readPart(raw)
		switch typ := rawString(f.typ); typ {
		case "input_text", "output_text", "text":
			if text.Len() > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(rawString(f.text))
		default:
			t.unsupported(where+".type", "a tool output part of type "+strconv.Quote(typ)+", which chat completions cannot carry")
			return t.err == nil
		}
		return true
	})
	return string(rawjson.AppendString(nil, text.String()))
}

// tools translates function tools ({type, name, description, parameters,
// strict}) into chat tools ({type, function: {...}}); the provider's built-in
// tools cannot be carried.
func (t *responsesTranslator) tools(v gjson.Result) string {
	if !v.IsArray() {
		t.fail("tools", "invalid_type", "tools: must be an array")
		return ""
	}
	out := []byte{'['}
	i := 0
	v.ForEach(func(_, tool gjson.Result) bool {
		where := "tools[" + strconv.Itoa(i) + "]"
		i++
		if typ := tool.Get("type").Str; typ != "function" {
			t.unsupported(where+".type", "a tool of type "+strconv.Quote(typ)+"; chat completions take function tools only")
			return t.err == nil
		}
		fn := []byte(`{"type":"function","function":{`)
		n := 0
		tool.ForEach(func(k, fv gjson.Result) bool {
			switch k.Str {
			case "type":
			case "name", "description", "parameters", "strict":
				if fv.Type == gjson.Null {
					return true
				}
				if n > 0 {
					fn = append(fn, ',')
				}
				n++
				fn = append(fn, k.Raw...)
				fn = append(fn, ':')
				fn = append(fn, fv.Raw...)
			default:
				t.unsupported(where+"."+k.Str, "a chat function tool has a name, description, parameters and strict, nothing else")
			}
			return t.err == nil
		})
		if t.err != nil {
			return false
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, fn...)
		out = append(out, "}}"...)
		return true
	})
	if len(out) == 1 {
		return ""
	}
	return string(append(out, ']'))
}

// toolChoice translates tool_choice: the modes as they are, a named function into
// chat's shape.
func (t *responsesTranslator) toolChoice(v gjson.Result) string {
	switch {
	case v.Type == gjson.String:
		return v.Raw
	case v.IsObject() && v.Get("type").Str == "function" && v.Get("name").Type == gjson.String:
		return `{"type":"function","function":{"name":` + v.Get("name").Raw + `}}`
	}
	t.unsupported("tool_choice", v.Raw+" cannot be carried: chat completions take none, auto, required or one function")
	return ""
}

// text translates text: format → response_format, verbosity → verbosity.
func (t *responsesTranslator) text(v gjson.Result, add func(key, raw string)) {
	if !v.IsObject() {
		t.fail("text", "invalid_type", "text: must be an object")
		return
	}
	v.ForEach(func(k, fv gjson.Result) bool {
		switch k.Str {
		case "format":
			if rf := t.format(fv); rf != "" {
				add("response_format", rf)
			}
		case "verbosity":
			if fv.Type != gjson.Null {
				add("verbosity", fv.Raw)
			}
		default:
			t.unsupported("text."+k.Str, "chat completions have no such setting")
		}
		return t.err == nil
	})
}

// format translates text.format into a response_format ("" for plain text).
func (t *responsesTranslator) format(f gjson.Result) string {
	if f.Type == gjson.Null {
		return ""
	}
	switch f.Get("type").Str {
	case "text":
		return ""
	case "json_object":
		return `{"type":"json_object"}`
	case "json_schema":
		out := []byte(`{"type":"json_schema","json_schema":{`)
		n := 0
		f.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "type":
			case "name", "schema", "description", "strict":
				if n > 0 {
					out = append(out, ',')
				}
				n++
				out = append(out, k.Raw...)
				out = append(out, ':')
				out = append(out, v.Raw...)
			default:
				t.unsupported("text.format."+k.Str, "a chat response_format has no such setting")
			}
			return t.err == nil
		})
		return string(append(out, "}}"...))
	}
	t.unsupported("text.format.type", "a format of type "+strconv.Quote(f.Get("type").String())+", which chat completions cannot carry")
	return ""
}

// reasoning translates reasoning: effort → reasoning_effort. The summary settings
// are honoured as far as a chat upstream allows: its reasoning_content, when it
// sends one, becomes the answer's reasoning summary.
func (t *responsesTranslator) reasoning(v gjson.Result, add func(key, raw string)) {
	if !v.IsObject() {
		t.fail("reasoning", "invalid_type", "reasoning: must be an object")
		return
	}
	v.ForEach(func(k, fv gjson.Result) bool {
		switch k.Str {
		case "effort":
			if fv.Type != gjson.Null {
				add("reasoning_effort", fv.Raw)
			}
		case "summary", "generate_summary":
		default:
			t.unsupported("reasoning."+k.Str, "chat completions have no such setting")
		}
		return t.err == nil
	})
}

// append renders the message as chat JSON.
func (m chatMessage) append(b []byte) []byte {
	b = append(b, `{"role":`...)
	b = rawjson.AppendString(b, m.role)
	if m.content != "" {
		b = append(b, `,"content":`...)
		b = append(b, m.content...)
	}
	if m.refusal != "" {
		b = append(b, `,"refusal":`...)
		b = append(b, m.refusal...)
	}
	if len(m.calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range m.calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, c...)
		}
		b = append(b, ']')
	}
	if m.toolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = append(b, m.toolCallID...)
	}
	return append(b, '}')
}

// rawOr is r's raw JSON, or or when r does not exist.
func rawOr(r gjson.Result, or string) string {
	if r.Exists() {
		return r.Raw
	}
	return or
}

// rawOrEmpty is raw, or or when raw is absent ("").
func rawOrEmpty(raw, or string) string {
	if raw == "" {
		return or
	}
	return raw
}
