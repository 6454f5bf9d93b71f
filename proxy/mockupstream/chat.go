package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// systemFingerprint is sent in every completion, as OpenAI does.
const systemFingerprint = "fp_factgate_mock"

// chatRequest is what the mock reads from a chat completion request. Its strings may
// point into the request body, so it must not outlive the handler.
type chatRequest struct {
	model string
	// modelJSON is the model's JSON string token, echoed verbatim in the response.
	modelJSON      string
	stream         bool
	includeUsage   bool
	responseFormat string
	// n is the number of choices asked for (1 when the request does not say).
	n        int
	messages []chatMessage
	// lastUser and lastAssistant index messages; -1 when there is none.
	lastUser, lastAssistant int
	promptTokens            int
}

// chatMessage is one message. Its text is decoded only when a rule or a template
// reads it: unescaping a long log costs more than the rest of the answer.
type chatMessage struct {
	role string
	// content is the raw JSON value of the message's content.
	content string
	text    string
	decoded bool
}

// text is message i's text (see messageText).
func (q *chatRequest) text(i int) string {
	m := &q.messages[i]
	if !m.decoded {
		m.text, m.decoded = messageText(m.content), true
	}
	return m.text
}

func (q *chatRequest) lastUserText() string {
	if q.lastUser < 0 {
		return ""
	}
	return q.text(q.lastUser)
}

// requestError is a client mistake the mock answers with a 400 envelope.
type requestError struct {
	param, code, msg string
}

func (e *requestError) Error() string { return e.msg }

// parseChatRequest reads a chat completion request body. body must be valid JSON.
func parseChatRequest(body string, q *chatRequest) error {
	root := gjson.Parse(body)
	if !root.IsObject() {
		return &requestError{code: "invalid_json", msg: "the request body must be a JSON object"}
	}
	q.lastUser, q.lastAssistant, q.n = -1, -1, 1
	var messages gjson.Result
	var nErr *requestError
	root.ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "model":
			if value.Type == gjson.String {
				q.model, q.modelJSON = value.Str, value.Raw
			}
		case "stream":
			q.stream = value.Type == gjson.True
		case "stream_options":
			q.includeUsage = value.Get("include_usage").Type == gjson.True
		case "response_format":
			q.responseFormat = value.Get("type").String()
		case "n":
			if value.Type == gjson.Null {
				break
			}
			if n := value.Int(); value.Type != gjson.Number || float64(n) != value.Num || n < 1 || n > maxChoices {
				nErr = &requestError{param: "n", code: "invalid_value", msg: fmt.Sprintf("n must be an integer from 1 to %d, got %s", maxChoices, value.Raw)}
			} else {
				q.n = int(n)
			}
		case "messages":
			messages = value
		}
		return true
	})
	if nErr != nil {
		return nErr
	}
	if q.modelJSON == "" {
		return &requestError{param: "model", code: "missing_model", msg: "you must provide a model parameter (a string)"}
	}
	if !messages.IsArray() {
		return &requestError{param: "messages", code: "missing_messages", msg: "messages must be an array of messages"}
	}
	messages.ForEach(func(_, m gjson.Result) bool {
		var msg chatMessage
		rawjson.EachMember(m.Raw, func(mb rawjson.Member) bool {
			switch rawjson.Key(mb.Key) {
			case "role":
				msg.role, _ = rawjson.StringValue(mb.Raw)
			case "content":
				msg.content = mb.Raw
			}
			return true
		})
		switch msg.role {
		case "user":
			q.lastUser = len(q.messages)
		case "assistant":
			q.lastAssistant = len(q.messages)
		}
		q.promptTokens += messageTokenOverhead + (messageTextLen(msg.content)+3)/4
		q.messages = append(q.messages, msg)
		return true
	})
	if len(q.messages) == 0 {
		return &requestError{param: "messages", code: "empty_messages", msg: "messages must not be empty"}
	}
	return nil
}

// maxChoices is the most choices a request may ask for, as OpenAI allows.
const maxChoices = 128

// messageText is a message content's text: the string, or the text parts of an array
// joined with "\n"; anything else (null, tool calls only) has no text. content is
// the raw JSON value.
func messageText(content string) string {
	switch {
	case strings.HasPrefix(content, `"`):
		return gjson.Parse(content).Str
	case strings.HasPrefix(content, "["):
		var b strings.Builder
		n := 0
		forEachTextPart(content, func(text string) {
			if n > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(gjson.Parse(text).Str)
			n++
		})
		return b.String()
	default:
		return ""
	}
}

// messageTextLen is len(messageText(content)) without decoding the text.
func messageTextLen(content string) int {
	switch {
	case strings.HasPrefix(content, `"`):
		return rawjson.UnescapedLen(content)
	case strings.HasPrefix(content, "["):
		n, parts := 0, 0
		forEachTextPart(content, func(text string) {
			if parts > 0 {
				n++
			}
			n += rawjson.UnescapedLen(text)
			parts++
		})
		return n
	default:
		return 0
	}
}

// forEachTextPart calls fn with the raw JSON string of every {"type":"text","text":...}
// part of a content array.
func forEachTextPart(content string, fn func(text string)) {
	gjson.Parse(content).ForEach(func(_, part gjson.Result) bool {
		var typ, text string
		rawjson.EachMember(part.Raw, func(mb rawjson.Member) bool {
			switch rawjson.Key(mb.Key) {
			case "type":
				typ, _ = rawjson.StringValue(mb.Raw)
			case "text":
				text = mb.Raw
			}
			return true
		})
		if typ == "text" && strings.HasPrefix(text, `"`) {
			fn(text)
		}
		return true
	})
}

// messageTokenOverhead is what each message adds to prompt_tokens besides its text,
// like the role and separators of a real tokenizer's chat template.
const messageTokenOverhead = 4

// Tokens is the mock's token count of a text: ceil(len(text) / 4), counting bytes, so
// "" is 0 and "hello" is 2. It is deterministic, which is all tests need.
func Tokens(text string) int { return (len(text) + 3) / 4 }

// PromptTokens is the prompt_tokens the mock reports for a request body: for every
// message, 4 plus Tokens of its text (a content string, or the text parts of a content
// array joined with "\n"). It fails on a body that is not a valid chat request.
func PromptTokens(body []byte) (int, error) {
	if !rawjson.Valid(body, rawjson.DefaultMaxDepth) {
		return 0, errors.New("mock upstream: the request body is not valid JSON")
	}
	var q chatRequest
	if err := parseChatRequest(string(body), &q); err != nil {
		return 0, fmt.Errorf("mock upstream: %w", err)
	}
	return q.promptTokens, nil
}

// CompletionTokens is the completion_tokens the mock reports for an answer:
// Tokens(content) + Tokens(reasoning).
func CompletionTokens(content, reasoning string) int {
	return Tokens(content) + Tokens(reasoning)
}

// pick finds the answer for q: the first rule whose match holds, else the default.
func (cs *compiledScript) pick(q *chatRequest, h http.Header) (*compiledAnswer, string) {
	for i := range cs.rules {
		r := &cs.rules[i]
		if !r.match.holds(q, h) {
			continue
		}
		if r.generate != nil {
			return r.generated(q), r.name
		}
		n := int(r.served.Add(1) - 1)
		if r.random != nil && r.random.fails(n) {
			return r.randomAnswer, r.name
		}
		switch {
		case n < len(r.answers):
		case r.cycle:
			n %= len(r.answers)
		default:
			n = len(r.answers) - 1
		}
		return r.answers[n], r.name
	}
	return cs.def, "default"
}

// generated computes a Generate rule's answer for q; an answer that does not
// compile becomes a 500 error envelope.
func (r *compiledRule) generated(q *chatRequest) *compiledAnswer {
	// The request's strings point into a pooled body; the generator may keep them.
	req := Request{Model: strings.Clone(q.model), N: q.n, Messages: make([]Message, len(q.messages))}
	for i := range q.messages {
		req.Messages[i] = Message{Role: strings.Clone(q.messages[i].role), Text: strings.Clone(q.text(i))}
	}
	ans := r.generate(req)
	a, err := compileAnswer(&ans, r.dir)
	if err != nil {
		body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "mock rule " + r.name + ": the generated answer is not valid: " + err.Error(),
			"type": "server_error", "param": nil, "code": "invalid_generated_answer"}})
		a, _ = compileAnswer(&Answer{Fault: &Fault{Status: http.StatusInternalServerError, Body: string(body)}}, "")
	}
	return a
}

// holds reports whether every predicate of m holds for q; cheap ones first.
func (m *compiledMatch) holds(q *chatRequest, h http.Header) bool {
	if m.model != "" && q.model != m.model {
		return false
	}
	if m.hasAssistant != nil && *m.hasAssistant != (q.lastAssistant >= 0) {
		return false
	}
	if m.responseFormat != "" && q.responseFormat != m.responseFormat {
		return false
	}
	for _, hm := range m.headers {
		if !anyMatches(hm, h[hm.name]) {
			return false
		}
	}
	if !m.needsText {
		return true
	}
	if m.lastUser != nil && (q.lastUser < 0 || !m.lastUser.MatchString(q.text(q.lastUser))) {
		return false
	}
	if m.assistant != nil && (q.lastAssistant < 0 || !m.assistant.MatchString(q.text(q.lastAssistant))) {
		return false
	}
	if m.system != nil {
		var parts []string
		for i, msg := range q.messages {
			if msg.role == "system" || msg.role == "developer" {
				parts = append(parts, q.text(i))
			}
		}
		if len(parts) == 0 || !m.system.MatchString(strings.Join(parts, "\n")) {
			return false
		}
	}
	if m.anyMessage != nil {
		found := false
		for i := range q.messages {
			if m.anyMessage.MatchString(q.text(i)) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func anyMatches(hm headerMatch, values []string) bool {
	for _, v := range values {
		if hm.re.MatchString(v) {
			return true
		}
	}
	return false
}

// bodyPool holds request and response buffers when nothing is recorded.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

var errBodyTooLarge = fmt.Errorf("request body over %d bytes", maxRequestBody)

// readBody reads the whole request body. When recording, the bytes are the
// recording's own; otherwise they come from a pool and are valid until release.
func (ex *exchange) readBody() ([]byte, error) {
	var buf []byte
	if ex.rec == nil {
		p := bodyPool.Get().(*[]byte)
		ex.pooled = append(ex.pooled, p)
		buf = (*p)[:0]
	}
	if n := ex.r.ContentLength; n > maxRequestBody {
		return nil, errBodyTooLarge
	} else if n > 0 && int64(cap(buf)) < n {
		buf = make([]byte, 0, n)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := ex.r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > maxRequestBody {
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			ex.cancelled = true
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
	}
	if ex.rec == nil && len(ex.pooled) > 0 {
		*ex.pooled[len(ex.pooled)-1] = buf
	}
	return buf, nil
}

// buffer returns an empty pooled buffer, valid until release.
func (ex *exchange) buffer() []byte {
	p := bodyPool.Get().(*[]byte)
	ex.pooled = append(ex.pooled, p)
	return (*p)[:0]
}

// keep stores b back into the last pooled buffer so a grown buffer is reused.
func (ex *exchange) keep(b []byte) {
	if len(ex.pooled) > 0 {
		*ex.pooled[len(ex.pooled)-1] = b
	}
}

// release returns the pooled buffers; nothing read from them may be used afterwards.
func (ex *exchange) release() {
	for _, p := range ex.pooled {
		if cap(*p) <= 1<<20 {
			*p = (*p)[:0]
			bodyPool.Put(p)
		}
	}
	ex.pooled = ex.pooled[:0]
}

// readJSONBody reads and records a request body that must be JSON; it answers the
// client itself and returns ok false when it is too large, cut or not JSON.
func (ex *exchange) readJSONBody() (body []byte, ok bool) {
	body, err := ex.readBody()
	if ex.rec != nil {
		ex.rec.Body = body
	}
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			ex.writeError(http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large", "", err.Error())
		}
		return nil, false
	}
	if !rawjson.Valid(body, rawjson.DefaultMaxDepth) {
		ex.writeError(http.StatusBadRequest, "invalid_request_error", "invalid_json", "",
			"we could not parse the JSON body of your request")
		return nil, false
	}
	return body, true
}

// serveChat answers POST /v1/chat/completions.
func (s *Server) serveChat(ex *exchange) {
	body, ok := ex.readJSONBody()
	if !ok {
		return
	}
	sc := scratchPool.Get().(*chatScratch)
	defer sc.release()
	q := &sc.q
	q.messages = sc.msgs[:0]
	if err := parseChatRequest(unsafeString(body), q); err != nil {
		var re *requestError
		errors.As(err, &re)
		ex.writeError(http.StatusBadRequest, "invalid_request_error", re.code, re.param, re.msg)
		return
	}
	cs := s.script.Load()
	a, rule := cs.pick(q, ex.r.Header)
	if ex.rec != nil {
		ex.rec.Rule = rule
	}
	if !s.beforeAnswer(ex, a) {
		return
	}

	ans := &sc.ans
	*ans = renderedAnswer{a: a, id: s.completionSeq.Add(1), created: s.now().Unix()}
	ans.render(q)
	h := ex.w.Header()
	for _, kv := range a.headers {
		h[kv[0]] = []string{kv[1]}
	}
	if q.stream {
		s.streamAnswer(ex, q, ans)
		return
	}
	if !s.pace(ex, q, ans) {
		return
	}
	s.writeAnswer(ex, q, ans)
}

// pace waits, for a paced answer sent whole, about as long as its stream would
// take (Answer.Paced); it reports whether the client is still there.
func (s *Server) pace(ex *exchange, q *chatRequest, ans *renderedAnswer) bool {
	a := ans.a
	if !a.paced {
		return true
	}
	delay, size := a.chunkDelay, a.chunkSize
	if delay == 0 {
		delay = s.opts.ChunkDelay
	}
	if size == 0 {
		size = s.chunkSize
	}
	pieces := func(text string) int { return (utf8.RuneCountInString(text) + size - 1) / size }
	events := 1 // [DONE], or the terminal event
	if q.includeUsage {
		events++
	}
	for i := range ans.n {
		rc := ans.choice(i)
		events += 2 + pieces(rc.content) + pieces(rc.reasoning) // role, finish
		for _, tc := range rc.c.toolCalls {
			events += 1 + pieces(tc.args)
		}
	}
	return ex.wait(time.Duration(events) * delay)
}

// beforeAnswer waits the answer's latency (and slow first byte) and sends the
// faults that replace an answer (a status, a dropped connection); it reports
// whether the answer is to be sent.
func (s *Server) beforeAnswer(ex *exchange, a *compiledAnswer) bool {
	latency := a.latency
	if latency == 0 {
		latency = s.opts.Latency
	}
	if f := a.fault; f != nil {
		latency += f.SlowFirstByte
	}
	if !ex.wait(latency) {
		return false
	}
	if f := a.fault; f != nil {
		switch {
		case f.Drop:
			ex.cut()
			return false
		case f.Status != 0:
			h := ex.w.Header()
			h["Content-Type"] = []string{a.faultContentType}
			for _, kv := range a.faultHeaders {
				h[kv[0]] = []string{kv[1]}
			}
			ex.writeHeader(f.Status)
			ex.write([]byte(f.Body))
			return false
		}
	}
	return true
}

// chatScratch is the per-request state of a chat completion, pooled: a request
// with a few messages then allocates nothing for its parsing.
type chatScratch struct {
	q    chatRequest
	msgs [8]chatMessage
	ans  renderedAnswer
}

var scratchPool = sync.Pool{New: func() any { return new(chatScratch) }}

// release clears what points into the request body and returns sc to the pool.
func (sc *chatScratch) release() {
	clear(sc.msgs[:])
	sc.q = chatRequest{}
	sc.ans = renderedAnswer{}
	scratchPool.Put(sc)
}

// renderedAnswer is an answer for one request: templates applied, ids and counts
// known.
type renderedAnswer struct {
	a       *compiledAnswer
	id      uint64
	created int64
	// n is the number of choices; first is choice 0, more the others.
	n                int
	first            renderedChoice
	more             []renderedChoice
	promptTokens     int
	completionTokens int
}

// renderedChoice is one choice of a renderedAnswer.
type renderedChoice struct {
	c                          *compiledChoice
	content, reasoning         string
	contentJSON, reasoningJSON []byte
}

// choice returns choice i (0 <= i < n).
func (ans *renderedAnswer) choice(i int) *renderedChoice {
	if i == 0 {
		return &ans.first
	}
	return &ans.more[i-1]
}

func (ans *renderedAnswer) render(q *chatRequest) {
	a := ans.a
	ans.n = q.n
	if ans.n > 1 {
		ans.more = make([]renderedChoice, ans.n-1)
	}
	last := ""
	if a.templated {
		last = q.lastUserText()
	}
	ans.completionTokens = 0
	for i := range ans.n {
		rc := ans.choice(i)
		rc.c = a.choices[min(i, len(a.choices)-1)]
		c := rc.c
		if c.templated {
			rc.content = strings.ReplaceAll(c.content, lastUserPlaceholder, last)
			rc.reasoning = strings.ReplaceAll(c.reasoning, lastUserPlaceholder, last)
			rc.contentJSON = rawjson.AppendString(nil, rc.content)
			if rc.reasoning != "" {
				rc.reasoningJSON = rawjson.AppendString(nil, rc.reasoning)
			}
			ans.completionTokens += CompletionTokens(rc.content, rc.reasoning) + c.toolTokens
		} else {
			rc.content, rc.reasoning = c.content, c.reasoning
			rc.contentJSON, rc.reasoningJSON = c.contentJSON, c.reasoningJSON
			ans.completionTokens += c.completionTokens
		}
	}
	ans.promptTokens = q.promptTokens
	if a.promptTokensOverride > 0 {
		ans.promptTokens = a.promptTokensOverride
	}
	if a.completionTokensOverride > 0 {
		ans.completionTokens = a.completionTokensOverride
	}
}

// appendHead appends the members every completion object starts with, up to and
// including the comma before "choices".
func (ans *renderedAnswer) appendHead(b []byte, object string, q *chatRequest) []byte {
	b = append(b, `{"id":"chatcmpl-mock-`...)
	b = strconv.AppendUint(b, ans.id, 10)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, ans.created, 10)
	b = append(b, `,"model":`...)
	b = append(b, q.modelJSON...)
	b = append(b, `,"system_fingerprint":"`+systemFingerprint+`",`...)
	return b
}

func (ans *renderedAnswer) appendUsage(b []byte) []byte {
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(ans.promptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(ans.completionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(ans.promptTokens+ans.completionTokens), 10)
	b = append(b, '}')
	return b
}

// appendTail closes a completion object: extra members, then "}", then the extra
// values that replace the mock's own members.
func (ans *renderedAnswer) appendTail(b []byte, start int) []byte {
	b = append(b, ans.a.extraMembers...)
	b = append(b, '}')
	if len(ans.a.extraOverrides) == 0 {
		return b
	}
	obj := b[start:]
	for k, v := range ans.a.extraOverrides {
		// Keys are plain member names; sjson paths need their specials escaped.
		obj, _ = sjson.SetRawBytes(obj, gjson.Escape(k), v)
	}
	return append(b[:start], obj...)
}

// writeAnswer sends a non-stream chat.completion.
func (s *Server) writeAnswer(ex *exchange, q *chatRequest, ans *renderedAnswer) {
	b := ex.buffer()
	b = ans.appendHead(b, "chat.completion", q)
	b = append(b, `"choices":[`...)
	for i := range ans.n {
		rc := ans.choice(i)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"message":{"role":"assistant","content":`...)
		if rc.c.nullContent {
			b = append(b, "null"...)
		} else {
			b = append(b, rc.contentJSON...)
		}
		if rc.reasoningJSON != nil {
			b = append(b, `,"reasoning_content":`...)
			b = append(b, rc.reasoningJSON...)
		}
		if rc.c.toolCallsJSON != nil {
			b = append(b, `,"tool_calls":`...)
			b = append(b, rc.c.toolCallsJSON...)
		}
		b = append(b, `},"logprobs":null,"finish_reason":`...)
		b = append(b, rc.c.finishJSON...)
		b = append(b, '}')
	}
	b = append(b, `],`...)
	b = ans.appendUsage(b)
	b = ans.appendTail(b, 0)
	ex.keep(b)
	b = ex.jsonBody(b)

	h := ex.w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	f := ans.a.fault
	switch {
	case f != nil && f.Malformed:
		// Cut in the middle of the object: a complete HTTP response whose JSON is not.
		b = b[:len(b)/2]
		h["Content-Length"] = []string{strconv.Itoa(len(b))}
		ex.writeHeader(http.StatusOK)
		ex.write(b)
	case f != nil && f.DisconnectAfter > 0:
		ex.writeHeader(http.StatusOK)
		ex.write(b[:len(b)/2])
		ex.cut()
	default:
		ex.writeHeader(http.StatusOK)
		ex.write(b)
	}
}

// streamAnswer sends the answer as server-sent chat.completion.chunk events, per
// choice: a role chunk, reasoning pieces, content pieces, each tool call (its id,
// type and name, then its arguments in pieces), a finish chunk. Several choices are
// interleaved, one event of each in turn, as OpenAI interleaves them. Then a usage
// chunk when asked for, then [DONE]. It flushes after every event.
func (s *Server) streamAnswer(ex *exchange, q *chatRequest, ans *renderedAnswer) {
	h := ex.w.Header()
	h["Content-Type"] = contentTypeSSE
	h["Cache-Control"] = noCache
	ex.writeHeader(http.StatusOK)

	a := ans.a
	flusher, _ := ex.w.(http.Flusher)
	st := sseStream{ex: ex, ans: ans, q: q, delay: a.chunkDelay, flusher: flusher}
	if st.delay == 0 {
		st.delay = s.opts.ChunkDelay
	}
	if f := a.fault; f != nil {
		st.disconnectAfter = f.DisconnectAfter
	}
	size := a.chunkSize
	if size == 0 {
		size = s.chunkSize
	}
	st.buf = ex.buffer()
	defer func() { ex.keep(st.buf) }()
	st.piece = make([]byte, 0, 64+4*size)

	if f := a.fault; f != nil && f.Malformed {
		if !st.event(0, st.roleDelta(&ans.first), "null") {
			return
		}
		st.piece = append(append(st.piece[:0], `{"content":`...), ans.first.contentJSON...)
		st.piece = append(st.piece, '}')
		ev := append([]byte(nil), st.chunk(0, st.piece, "null", false)...)
		// Drop the closing of the JSON: the data line is invalid.
		ev = ev[:len(ev)/2]
		if !st.emit(ev) {
			return
		}
		st.done()
		return
	}
	var one [1]choiceEvents
	events := one[:]
	if ans.n > 1 {
		events = make([]choiceEvents, ans.n)
	}
	for i := range events {
		events[i] = choiceEvents{index: i, rc: ans.choice(i)}
	}
	for open := len(events); open > 0; {
		open = 0
		for i := range events {
			ce := &events[i]
			if ce.phase == phaseDone {
				continue
			}
			delta, finish := ce.next(&st, size)
			if !st.event(i, delta, finish) {
				return
			}
			if ce.phase != phaseDone {
				open++
			}
		}
	}
	if q.includeUsage && !st.emit(st.chunk(0, nil, "", true)) {
		return
	}
	st.done()
}

// The phases of one choice's events, in order.
const (
	phaseRole = iota
	phaseReasoning
	phaseContent
	phaseTools
	phaseFinish
	phaseDone
)

// choiceEvents walks the events of one choice.
type choiceEvents struct {
	index int
	rc    *renderedChoice
	phase int
	text  string // what is left of the text being sent in pieces
	call  int    // the tool call being sent
	head  bool   // the tool call's first delta (id, type, name) went out
}

// next returns the choice's next event: its delta and finish_reason, built in
// st's buffers (valid until the next call).
func (ce *choiceEvents) next(st *sseStream, size int) (delta []byte, finish string) {
	for {
		switch ce.phase {
		case phaseRole:
			ce.phase, ce.text = phaseReasoning, ce.rc.reasoning
			return st.roleDelta(ce.rc), "null"
		case phaseReasoning:
			if ce.text != "" {
				return st.pieceDelta(&ce.text, `{"reasoning_content":`, "}", size), "null"
			}
			ce.phase, ce.text = phaseContent, ce.rc.content
		case phaseContent:
			if ce.text != "" {
				return st.pieceDelta(&ce.text, `{"content":`, "}", size), "null"
			}
			ce.phase = phaseTools
		case phaseTools:
			calls := ce.rc.c.toolCalls
			if ce.call >= len(calls) {
				ce.phase = phaseFinish
				continue
			}
			tc := &calls[ce.call]
			if !ce.head {
				ce.head, ce.text = true, tc.args
				st.piece = append(append(st.piece[:0], `{"tool_calls":[`...), tc.head...)
				return append(st.piece, "]}"...), "null"
			}
			if ce.text != "" {
				prefix := `{"tool_calls":[{"index":` + strconv.Itoa(ce.call) + `,"function":{"arguments":`
				return st.pieceDelta(&ce.text, prefix, "}}]}", size), "null"
			}
			ce.call, ce.head = ce.call+1, false
		case phaseFinish:
			ce.phase = phaseDone
			return append(st.piece[:0], "{}"...), ce.rc.c.finish
		default:
			return nil, ""
		}
	}
}

// sseStream writes the events of one streamed answer.
type sseStream struct {
	ex              *exchange
	ans             *renderedAnswer
	q               *chatRequest
	delay           time.Duration
	disconnectAfter int
	events          int
	buf             []byte
	piece           []byte
	flusher         http.Flusher
}

// roleDelta is a choice's first delta: the role, and an empty content (null when
// the choice answers with tool calls only).
func (st *sseStream) roleDelta(rc *renderedChoice) []byte {
	if rc.c.nullContent {
		return append(st.piece[:0], `{"role":"assistant","content":null}`...)
	}
	return append(st.piece[:0], `{"role":"assistant","content":""}`...)
}

// pieceDelta cuts the next piece of size runes off *text (a rune is never split)
// and returns the delta open + the piece as a JSON string + close.
func (st *sseStream) pieceDelta(text *string, open, close string, size int) []byte {
	t := *text
	end, n := 0, 0
	for end < len(t) && n < size {
		_, w := utf8.DecodeRuneInString(t[end:])
		end += w
		n++
	}
	*text = t[end:]
	st.piece = append(st.piece[:0], open...)
	st.piece = rawjson.AppendString(st.piece, t[:end])
	return append(st.piece, close...)
}

// chunk builds one chat.completion.chunk object for choice index with delta;
// usage builds the usage chunk with empty choices instead.
func (st *sseStream) chunk(index int, delta []byte, finish string, usage bool) []byte {
	ans := st.ans
	b := ans.appendHead(st.buf[:0], "chat.completion.chunk", st.q)
	if usage {
		b = append(b, `"choices":[],`...)
		b = ans.appendUsage(b)
	} else {
		b = append(b, `"choices":[{"index":`...)
		b = strconv.AppendInt(b, int64(index), 10)
		b = append(b, `,"delta":`...)
		b = append(b, delta...)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
		b = append(b, finish...)
		b = append(b, `}]`...)
		if st.q.includeUsage {
			b = append(b, `,"usage":null`...)
		}
	}
	b = ans.appendTail(b, 0)
	st.buf = b
	return b
}

// event sends one data event for choice index.
func (st *sseStream) event(index int, delta []byte, finish string) bool {
	return st.emit(st.chunk(index, delta, finish, false))
}

var (
	dataPrefix = []byte("data: ")
	eventEnd   = []byte("\n\n")
	doneEvent  = []byte("data: [DONE]\n\n")
)

// emit writes one "data:" event and flushes it, after the chunk delay when it is not
// the first event; it cuts the connection once disconnectAfter events are out. It
// reports whether streaming goes on.
func (st *sseStream) emit(data []byte) bool {
	ex := st.ex
	if st.events > 0 && !ex.wait(st.delay) {
		return false
	}
	if ex.indent {
		// The event's JSON over several data: lines (Options.Indent).
		if !ex.write(append(ex.appendDataLines(nil, data), '\n')) {
			return false
		}
	} else if !ex.write(dataPrefix) || !ex.write(data) || !ex.write(eventEnd) {
		return false
	}
	st.flush()
	st.events++
	if st.disconnectAfter > 0 && st.events >= st.disconnectAfter {
		ex.cut()
		return false
	}
	return true
}

// done ends the stream with [DONE], unless a disconnect fault is pending: then the
// connection is cut instead.
func (st *sseStream) done() {
	ex := st.ex
	if st.disconnectAfter > 0 {
		ex.cut()
		return
	}
	if !ex.wait(st.delay) {
		return
	}
	if ex.write(doneEvent) {
		st.flush()
	}
}

// flush pushes the written events to the client. net/http's writer is always a
// Flusher; a wrapper that is not one only delays delivery.
func (st *sseStream) flush() {
	if st.flusher != nil {
		st.flusher.Flush()
	}
}

// unsafeString views b as a string without copying; b must not change while the
// string is used.
//
// unsafe: a string over b without a copy, read only while b is unchanged (docs/architecture.md, Lifetimes).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
