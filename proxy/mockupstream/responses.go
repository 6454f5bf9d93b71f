package mockupstream

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// The Responses API (POST /v1/responses), answered from the same script as chat
// completions. The request is matched as the conversation it stands for:
// instructions are a system message, a string input a user message, message items
// messages of their role (their input_text/output_text parts joined with "\n"), a
// function_call item an assistant turn, a function_call_output item a tool message
// whose text is the output. The answer becomes a Responses object: the reasoning as
// a reasoning item, the content as a message item, each tool call as a
// function_call item; finish_reason length (content_filter) makes it "incomplete"
// with that reason. Answers that store (store is not false) can be read back with
// GET /v1/responses/{id} and …/input_items, and deleted.

// responsesRequest is what the mock reads of a Responses request besides the
// conversation: the fields its answer echoes, as raw JSON ("" when absent).
type responsesRequest struct {
	instructions, maxOutputTokens, metadata, previousID, reasoning, temperature, text,
	toolChoice, tools, topP, user, parallelToolCalls string
	input string
	store bool
}

// maxStoredResponses bounds how many stored answers the mock keeps (the oldest go
// first).
const maxStoredResponses = 1000

// storedResponse is an answer kept for GET /v1/responses/{id}.
type storedResponse struct {
	object []byte
	input  []byte // the input items, with ids, as a JSON array
}

// parseResponsesRequest reads a Responses request into q (its conversation) and r.
func parseResponsesRequest(body string, q *chatRequest, r *responsesRequest) error {
	root := gjson.Parse(body)
	if !root.IsObject() {
		return &requestError{code: "invalid_json", msg: "the request body must be a JSON object"}
	}
	q.lastUser, q.lastAssistant, q.n = -1, -1, 1
	r.store = true
	var input gjson.Result
	root.ForEach(func(key, value gjson.Result) bool {
		raw := value.Raw
		switch key.Str {
		case "model":
			if value.Type == gjson.String {
				q.model, q.modelJSON = value.Str, value.Raw
			}
		case "stream":
			q.stream = value.Type == gjson.True
		case "text":
			q.responseFormat = value.Get("format.type").String()
			r.text = raw
		case "input":
			input = value
		case "instructions":
			r.instructions = raw
		case "max_output_tokens":
			r.maxOutputTokens = raw
		case "metadata":
			r.metadata = raw
		case "previous_response_id":
			r.previousID = raw
		case "reasoning":
			r.reasoning = raw
		case "temperature":
			r.temperature = raw
		case "tool_choice":
			r.toolChoice = raw
		case "tools":
			r.tools = raw
		case "top_p":
			r.topP = raw
		case "user":
			r.user = raw
		case "parallel_tool_calls":
			r.parallelToolCalls = raw
		case "store":
			r.store = value.Type != gjson.False
		}
		return true
	})
	if q.modelJSON == "" {
		return &requestError{param: "model", code: "missing_model", msg: "you must provide a model parameter (a string)"}
	}
	if ins := root.Get("instructions"); ins.Type == gjson.String {
		q.addMessage("system", ins.Str)
	}
	switch {
	case input.Type == gjson.String:
		q.addMessage("user", input.Str)
		r.input = input.Raw
	case input.IsArray():
		r.input = input.Raw
		input.ForEach(func(_, item gjson.Result) bool {
			switch typ := item.Get("type").Str; {
			case typ == "message" || (typ == "" && item.Get("role").Exists()):
				q.addMessage(item.Get("role").Str, partsText(item.Get("content")))
			case typ == "function_call":
				q.addMessage("assistant", "")
			case typ == "function_call_output":
				q.addMessage("tool", partsText(item.Get("output")))
			}
			return true
		})
	case input.Exists() && input.Type != gjson.Null:
		return &requestError{param: "input", code: "invalid_type", msg: "input must be a string or an array of input items"}
	case r.previousID == "" || r.previousID == "null":
		return &requestError{param: "input", code: "missing_required_parameter", msg: "you must provide input (or previous_response_id)"}
	}
	if len(q.messages) == 0 && (r.previousID == "" || r.previousID == "null") {
		return &requestError{param: "input", code: "empty_input", msg: "input must not be empty"}
	}
	return nil
}

// addMessage adds a message with its text decoded.
func (q *chatRequest) addMessage(role, text string) {
	switch role {
	case "user":
		q.lastUser = len(q.messages)
	case "assistant":
		q.lastAssistant = len(q.messages)
	}
	q.promptTokens += messageTokenOverhead + Tokens(text)
	q.messages = append(q.messages, chatMessage{role: role, text: text, decoded: true})
}

// partsText is a content's text: the string, or the text of its input_text,
// output_text and text parts joined with "\n".
func partsText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	c.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").Str {
		case "input_text", "output_text", "text":
			parts = append(parts, p.Get("text").Str)
		}
		return true
	})
	return strings.Join(parts, "\n")
}

// serveResponses answers POST /v1/responses.
func (s *Server) serveResponses(ex *exchange) {
	body, ok := ex.readJSONBody()
	if !ok {
		return
	}
	var q chatRequest
	var r responsesRequest
	if err := parseResponsesRequest(string(body), &q, &r); err != nil {
		var re *requestError
		errors.As(err, &re)
		ex.writeError(http.StatusBadRequest, "invalid_request_error", re.code, re.param, re.msg)
		return
	}
	a, rule := s.script.Load().pick(&q, ex.r.Header)
	if ex.rec != nil {
		ex.rec.Rule = rule
	}
	if !s.beforeAnswer(ex, a) {
		return
	}
	ans := &renderedAnswer{a: a, id: s.responseSeq.Add(1), created: s.now().Unix()}
	ans.render(&q)
	obj := s.responseObject(&q, &r, ans)
	if r.store {
		s.storeResponse(ans.id, obj, r.input)
	}
	h := ex.w.Header()
	for _, kv := range a.headers {
		h[kv[0]] = []string{kv[1]}
	}
	if q.stream {
		s.streamResponse(ex, ans, obj)
		return
	}
	if !s.pace(ex, &q, ans) {
		return
	}
	h["Content-Type"] = contentTypeJSON
	obj = ex.jsonBody(obj)
	f := a.fault
	switch {
	case f != nil && f.Malformed:
		ex.writeHeader(http.StatusOK)
		ex.write(obj[:len(obj)/2])
	case f != nil && f.DisconnectAfter > 0:
		h["Content-Length"] = []string{strconv.Itoa(len(obj))}
		ex.writeHeader(http.StatusOK)
		ex.write(obj[:len(obj)/2])
		ex.cut()
	default:
		ex.writeHeader(http.StatusOK)
		ex.write(obj)
	}
}

// responseStatus is the Responses status and incomplete_details of a finish
// reason (raw JSON, quoted).
func responseStatus(finish string) (status, incomplete string) {
	switch finish {
	case `"length"`:
		return "incomplete", `{"reason":"max_output_tokens"}`
	case `"content_filter"`:
		return "incomplete", `{"reason":"content_filter"}`
	}
	return "completed", "null"
}

func rawOr(raw, or string) string {
	if raw == "" {
		return or
	}
	return raw
}

// responseObject renders the answer as a Responses object.
func (s *Server) responseObject(q *chatRequest, r *responsesRequest, ans *renderedAnswer) []byte {
	rc := &ans.first
	id := strconv.FormatUint(ans.id, 10)
	status, incomplete := responseStatus(rc.c.finish)
	b := make([]byte, 0, 512+len(rc.content)+len(rc.reasoning))
	b = append(b, `{"id":"resp_mock_`...)
	b = append(b, id...)
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, ans.created, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","background":false,"error":null,"incomplete_details":`...)
	b = append(b, incomplete...)
	b = append(b, `,"instructions":`...)
	b = append(b, rawOr(r.instructions, "null")...)
	b = append(b, `,"max_output_tokens":`...)
	b = append(b, rawOr(r.maxOutputTokens, "null")...)
	b = append(b, `,"metadata":`...)
	b = append(b, rawOr(r.metadata, "{}")...)
	b = append(b, `,"model":`...)
	b = append(b, q.modelJSON...)
	b = append(b, `,"output":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	if rc.reasoning != "" {
		sep()
		b = append(b, `{"id":"rs_mock_`...)
		b = append(b, id...)
		b = append(b, `","type":"reasoning","summary":[{"type":"summary_text","text":`...)
		b = rawjson.AppendString(b, rc.reasoning)
		b = append(b, "}]}"...)
	}
	if !rc.c.nullContent {
		sep()
		msgStatus := "completed"
		if status == "incomplete" {
			msgStatus = "incomplete"
		}
		b = append(b, `{"id":"msg_mock_`...)
		b = append(b, id...)
		b = append(b, `","type":"message","status":"`...)
		b = append(b, msgStatus...)
		b = append(b, `","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
		b = rawjson.AppendString(b, rc.content)
		b = append(b, "}]}"...)
	}
	gjson.ParseBytes(rc.c.toolCallsJSON).ForEach(func(_, call gjson.Result) bool {
		sep()
		b = append(b, `{"id":`...)
		b = rawjson.AppendString(b, "fc_"+call.Get("id").Str)
		b = append(b, `,"type":"function_call","status":"completed","arguments":`...)
		b = rawjson.AppendString(b, call.Get("function.arguments").Str)
		b = append(b, `,"call_id":`...)
		b = rawjson.AppendString(b, call.Get("id").Str)
		b = append(b, `,"name":`...)
		b = rawjson.AppendString(b, call.Get("function.name").Str)
		b = append(b, '}')
		return true
	})
	b = append(b, `],"parallel_tool_calls":`...)
	b = append(b, rawOr(r.parallelToolCalls, "true")...)
	b = append(b, `,"previous_response_id":`...)
	b = append(b, rawOr(r.previousID, "null")...)
	b = append(b, `,"reasoning":`...)
	b = append(b, rawOr(r.reasoning, `{"effort":null,"summary":null}`)...)
	b = append(b, `,"store":`...)
	b = strconv.AppendBool(b, r.store)
	b = append(b, `,"temperature":`...)
	b = append(b, rawOr(r.temperature, "1")...)
	b = append(b, `,"text":`...)
	b = append(b, rawOr(r.text, `{"format":{"type":"text"}}`)...)
	b = append(b, `,"tool_choice":`...)
	b = append(b, rawOr(r.toolChoice, `"auto"`)...)
	b = append(b, `,"tools":`...)
	b = append(b, rawOr(r.tools, "[]")...)
	b = append(b, `,"top_p":`...)
	b = append(b, rawOr(r.topP, "1")...)
	b = append(b, `,"truncation":"disabled","usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(ans.promptTokens), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(ans.completionTokens), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(Tokens(rc.reasoning)), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(ans.promptTokens+ans.completionTokens), 10)
	b = append(b, `},"user":`...)
	b = append(b, rawOr(r.user, "null")...)
	b = append(b, '}')
	// extra: the answer's extra members, replacing the mock's own of the same name.
	if a := ans.a; len(a.extraMembers) > 0 || len(a.extraOverrides) > 0 {
		extra := gjson.Parse("{" + string(a.extraMembers[min(1, len(a.extraMembers)):]) + "}")
		extra.ForEach(func(k, v gjson.Result) bool {
			b, _ = sjson.SetRawBytes(b, gjson.Escape(k.Str), []byte(v.Raw))
			return true
		})
		for k, v := range a.extraOverrides {
			b, _ = sjson.SetRawBytes(b, gjson.Escape(k), v)
		}
	}
	return b
}

// storeResponse keeps an answer for GET /v1/responses/{id}, with the input items
// it answered (each given an id, as OpenAI lists them).
func (s *Server) storeResponse(n uint64, obj []byte, input string) {
	items := []byte{'['}
	if strings.HasPrefix(input, `"`) {
		items = append(items, `{"id":"msg_in_mock_`...)
		items = strconv.AppendUint(items, n, 10)
		items = append(items, `_0","type":"message","role":"user","content":[{"type":"input_text","text":`...)
		items = append(items, input...)
		items = append(items, "}]}"...)
	} else {
		i := 0
		gjson.Parse(input).ForEach(func(_, item gjson.Result) bool {
			raw := item.Raw
			if !item.Get("id").Exists() {
				raw, _ = sjson.Set(raw, "id", fmt.Sprintf("in_mock_%d_%d", n, i))
			}
			if len(items) > 1 {
				items = append(items, ',')
			}
			items = append(items, raw...)
			i++
			return true
		})
	}
	items = append(items, ']')
	id := gjson.GetBytes(obj, "id").Str
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stored == nil {
		s.stored = map[string]storedResponse{}
	}
	s.stored[id] = storedResponse{object: append([]byte(nil), obj...), input: items}
	s.storedOrder = append(s.storedOrder, id)
	if len(s.storedOrder) > maxStoredResponses {
		delete(s.stored, s.storedOrder[0])
		s.storedOrder = s.storedOrder[1:]
	}
}

// serveStoredResponse answers GET /v1/responses/{id}, GET …/{id}/input_items and
// DELETE /v1/responses/{id} from the stored answers.
func (s *Server) serveStoredResponse(ex *exchange, rest string) {
	if ex.rec != nil {
		ex.rec.Body, _ = ex.readBody()
	}
	id, sub, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	sr, ok := s.stored[id]
	if ok && ex.r.Method == http.MethodDelete && sub == "" {
		delete(s.stored, id)
	}
	s.mu.Unlock()
	method := ex.r.Method
	switch {
	case sub != "" && sub != "input_items":
		ex.writeError(http.StatusNotFound, "invalid_request_error", "not_found", "",
			fmt.Sprintf("mock upstream: no endpoint %s %s", method, ex.r.URL.Path))
		return
	case method != http.MethodGet && !(method == http.MethodDelete && sub == ""):
		ex.writeError(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "",
			fmt.Sprintf("%s %s is not supported", method, ex.r.URL.Path))
		return
	case !ok:
		ex.writeError(http.StatusNotFound, "invalid_request_error", "not_found", "",
			fmt.Sprintf("No response found with id '%s'.", id))
		return
	}
	var b []byte
	switch {
	case method == http.MethodDelete:
		b = rawjson.AppendString([]byte(`{"id":`), id)
		b = append(b, `,"object":"response","deleted":true}`...)
	case sub == "input_items":
		items := gjson.ParseBytes(sr.input).Array()
		b = append(b, `{"object":"list","data":`...)
		b = append(b, sr.input...)
		b = append(b, `,"first_id":`...)
		if len(items) > 0 {
			b = append(b, rawOr(items[0].Get("id").Raw, "null")...)
			b = append(b, `,"last_id":`...)
			b = append(b, rawOr(items[len(items)-1].Get("id").Raw, "null")...)
		} else {
			b = append(b, `null,"last_id":null`...)
		}
		b = append(b, `,"has_more":false}`...)
	default:
		b = sr.object
	}
	ex.w.Header()["Content-Type"] = contentTypeJSON
	ex.writeHeader(http.StatusOK)
	ex.write(ex.jsonBody(b))
}

// responseEvents writes a Responses event stream for the mock.
type responseEvents struct {
	ex              *exchange
	st              *sseStream // for the delay and flushing
	seq             int
	disconnectAfter int
	events          int
	buf             []byte
}

// emit writes one event whose data object has type, sequence_number and then
// members (each with its leading comma). It reports whether streaming goes on.
func (e *responseEvents) emit(typ string, members ...string) bool {
	ex := e.ex
	if e.events > 0 && !ex.wait(e.st.delay) {
		return false
	}
	b := append(e.buf[:0], "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(e.seq), 10)
	for _, m := range members {
		b = append(b, m...)
	}
	b = append(b, "}\n\n"...)
	if ex.indent {
		head := len("event: ") + len(typ) + 1
		data := b[head+len("data: ") : len(b)-2]
		b = append(ex.appendDataLines(append([]byte(nil), b[:head]...), data), '\n')
	}
	e.buf = b
	e.seq++
	if !ex.write(b) {
		return false
	}
	e.st.flush()
	e.events++
	if e.disconnectAfter > 0 && e.events >= e.disconnectAfter {
		ex.cut()
		return false
	}
	return true
}

// pieces sends text as delta events of size runes; loc are the members locating
// them.
func (e *responseEvents) pieces(typ, text string, size int, loc string) bool {
	for text != "" {
		end, n := 0, 0
		for end < len(text) && n < size {
			_, w := utf8.DecodeRuneInString(text[end:])
			end += w
			n++
		}
		if !e.emit(typ, loc, `,"delta":`+string(rawjson.AppendString(nil, text[:end]))) {
			return false
		}
		text = text[end:]
	}
	return true
}

// streamResponse sends the answer as the Responses API's event stream:
// response.created, response.in_progress, each output item's events (reasoning
// summary, message text, function call arguments, in pieces of chunk_size runes),
// response.completed (or response.incomplete). There is no [DONE].
func (s *Server) streamResponse(ex *exchange, ans *renderedAnswer, obj []byte) {
	h := ex.w.Header()
	h["Content-Type"] = contentTypeSSE
	h["Cache-Control"] = noCache
	ex.writeHeader(http.StatusOK)
	a := ans.a
	flusher, _ := ex.w.(http.Flusher)
	st := &sseStream{ex: ex, delay: a.chunkDelay, flusher: flusher}
	if st.delay == 0 {
		st.delay = s.opts.ChunkDelay
	}
	e := &responseEvents{ex: ex, st: st}
	if f := a.fault; f != nil {
		e.disconnectAfter = f.DisconnectAfter
	}
	size := a.chunkSize
	if size == 0 {
		size = s.chunkSize
	}
	root := gjson.ParseBytes(obj)
	start := string(obj)
	for _, f := range [...][2]string{{"status", `"in_progress"`}, {"output", "[]"}, {"usage", "null"}, {"incomplete_details", "null"}} {
		start, _ = sjson.SetRaw(start, f[0], f[1])
	}
	if !e.emit("response.created", `,"response":`+start) {
		return
	}
	if f := a.fault; f != nil && f.Malformed {
		// An event whose data is cut in half: invalid JSON.
		ev := `,"response":` + start
		if !e.emit("response.in_progress", ev[:len(ev)/2]) {
			return
		}
		return
	}
	if !e.emit("response.in_progress", `,"response":`+start) {
		return
	}
	ok := true
	i := 0
	root.Get("output").ForEach(func(_, item gjson.Result) bool {
		idx := `,"output_index":` + strconv.Itoa(i)
		loc := `,"item_id":` + item.Get("id").Raw + idx
		i++
		addedItem := item.Raw
		switch item.Get("type").Str {
		case "reasoning":
			addedItem, _ = sjson.SetRaw(addedItem, "summary", "[]")
		case "message":
			addedItem, _ = sjson.SetRaw(addedItem, "content", "[]")
			addedItem, _ = sjson.SetRaw(addedItem, "status", `"in_progress"`)
		case "function_call":
			addedItem, _ = sjson.SetRaw(addedItem, "arguments", `""`)
			addedItem, _ = sjson.SetRaw(addedItem, "status", `"in_progress"`)
		}
		if ok = e.emit("response.output_item.added", idx, `,"item":`+addedItem); !ok {
			return false
		}
		switch item.Get("type").Str {
		case "reasoning":
			text := item.Get("summary.0.text")
			sl := loc + `,"summary_index":0`
			ok = e.emit("response.reasoning_summary_part.added", sl, `,"part":{"type":"summary_text","text":""}`) &&
				e.pieces("response.reasoning_summary_text.delta", text.Str, size, sl) &&
				e.emit("response.reasoning_summary_text.done", sl, `,"text":`+text.Raw) &&
				e.emit("response.reasoning_summary_part.done", sl, `,"part":`+item.Get("summary.0").Raw)
		case "message":
			text := item.Get("content.0.text")
			cl := loc + `,"content_index":0`
			ok = e.emit("response.content_part.added", cl, `,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`) &&
				e.pieces("response.output_text.delta", text.Str, size, cl+`,"logprobs":[]`) &&
				e.emit("response.output_text.done", cl, `,"text":`+text.Raw, `,"logprobs":[]`) &&
				e.emit("response.content_part.done", cl, `,"part":`+item.Get("content.0").Raw)
		case "function_call":
			args := item.Get("arguments")
			ok = e.pieces("response.function_call_arguments.delta", args.Str, size, loc) &&
				e.emit("response.function_call_arguments.done", loc, `,"name":`+item.Get("name").Raw, `,"arguments":`+args.Raw)
		}
		if ok {
			ok = e.emit("response.output_item.done", idx, `,"item":`+item.Raw)
		}
		return ok
	})
	if !ok {
		return
	}
	terminal := "response.completed"
	if root.Get("status").Str == "incomplete" {
		terminal = "response.incomplete"
	}
	if !e.emit(terminal, `,"response":`+string(obj)) {
		return
	}
	if e.disconnectAfter > 0 {
		ex.cut()
	}
}
