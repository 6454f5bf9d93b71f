package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// Live reasoning (route option stream_reasoning): for a streaming client on an
// intercepted route, the draft's upstream call streams; its reasoning_content
// deltas reach the client at once as chunk events, while the content is
// accumulated and assembled into a chat.completion body for the response phases
// (validation, the hidden revision). Only content is validated and revised, so the
// reasoning the client already saw never needs taking back. Revisions and other
// hidden calls do not stream. The client's stream is committed as soon as the
// upstream starts answering (with its headers), so the X-Factgate-* headers of
// the response phases cannot follow: they come as comments at the end of the
// stream, and the trace has them.

// liveEvents queues SSE events produced by the upstream reader for the client's
// stream. The queue is unbounded: the upstream answer it comes from is bounded by
// max_response_body.
type liveEvents struct {
	mu    sync.Mutex
	buf   []byte
	ready chan struct{} // signalled (cap 1) when buf has data
}

func newLiveEvents() *liveEvents { return &liveEvents{ready: make(chan struct{}, 1)} }

func (l *liveEvents) push(event []byte) {
	l.mu.Lock()
	l.buf = append(l.buf, event...)
	l.mu.Unlock()
	select {
	case l.ready <- struct{}{}:
	default:
	}
}

// drain appends the queued events to dst and empties the queue.
func (l *liveEvents) drain(dst []byte) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	dst = append(dst, l.buf...)
	l.buf = l.buf[:0]
	return dst
}

// completeForwardingReasoning makes the draft's upstream call as a stream,
// forwards reasoning_content deltas to live, and returns the answer assembled as a
// non-streaming chat.completion. An upstream that answers without an event stream
// (an error status, or a provider that ignores "stream") is returned as it came.
func (c *routeCaller) completeForwardingReasoning(ctx context.Context, body []byte, live *liveEvents) (*interceptors.Response, error) {
	body, _ = sjson.SetBytes(body, "stream", true)
	body, _ = sjson.SetBytes(body, "stream_options.include_usage", true)
	start := c.begin()
	// Retries and fallbacks happen here, before any event reached the client;
	// once the stream is read, a break is the answer's failure, never retried.
	sp := c.plan(chatPath, body, isStreamed)
	res := c.send(ctx, &sp)
	if res.err != nil {
		c.end(start)
		return nil, res.err
	}
	cl, resp := res.cl, res.resp
	defer res.close(false)
	if cl == nil {
		// The answer of a failed attempt, read whole: pass it on.
		out := &interceptors.Response{Status: resp.StatusCode(), Body: append([]byte(nil), resp.Body()...)}
		for k, v := range resp.Header.All() {
			if !skipResponseHeader(k) {
				out.Header = append(out.Header, [2]string{string(k), string(v)})
			}
		}
		out.Duration = c.end(start)
		c.reportHeaders(out.Status, out.Header)
		return out, nil
	}
	out := &interceptors.Response{Status: resp.StatusCode()}
	for k, v := range resp.Header.All() {
		if skipResponseHeader(k) || (cl.stream && strings.EqualFold(string(k), "Content-Type")) {
			continue
		}
		out.Header = append(out.Header, [2]string{string(k), string(v)})
	}
	if !cl.stream {
		out.Body = append([]byte(nil), resp.Body()...)
		res.close(true)
		out.Duration = c.end(start)
		c.reportHeaders(out.Status, out.Header)
		return out, nil
	}
	// The answer has begun: a held stream may now commit, with these headers.
	c.reportHeaders(out.Status, out.Header)
	asm := &streamAssembly{live: live, max: c.maxBody, model: c.model, maxDepth: c.s.cfg.Server.MaxJSONDepth}
	stream := cl.body()
	err := asm.read(stream)
	complete := false
	if err == nil {
		// Read past [DONE] to the body's end, so the connection can be reused.
		n, derr := io.Copy(io.Discard, io.LimitReader(stream, 64<<10+1))
		complete = derr == nil && n <= 64<<10
		out.Body = asm.completion()
		res.call.Answer(out.Status, out.Body)
	}
	res.close(complete)
	out.Duration = c.end(start)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("reading the upstream's event stream: %w", err)
	}
	out.Header = append(out.Header, [2]string{"Content-Type", "application/json"})
	return out, nil
}

// streamAssembly accumulates a chat.completion.chunk stream.
type streamAssembly struct {
	live     *liveEvents
	max      int
	model    string // replaces the upstream's model in live events ("": keep it)
	maxDepth int    // server.max_json_depth, for each event's data
	size     int
	head     gjson.Result // the first chunk: id, created, model, system_fingerprint
	choices  []*choiceAssembly
	usage    string // raw usage object, "" when none came
}

type choiceAssembly struct {
	role      string
	content   bytes.Buffer
	reasoning bytes.Buffer
	// hasContent: a delta carried a content string (without, a choice that only
	// calls tools has content null, as in a non-streamed answer).
	hasContent bool
	calls      []*toolCallAssembly
	finish     string // raw finish_reason
}

// toolCallAssembly accumulates one tool call's deltas: the id, type and name
// come once, the arguments in pieces.
type toolCallAssembly struct {
	id, typ, name string
	args          bytes.Buffer
}

var errStreamTooLarge = errors.New("the answer exceeds max_response_body")

// read consumes the event stream until [DONE] or its end. An event's data is
// its data lines joined with newlines, as SSE clients read them (an upstream may
// spread one event's JSON over several).
func (a *streamAssembly) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 16<<10)
	var data []byte
	lines := 0
	dispatch := func() (bool, error) {
		if lines == 0 {
			return false, nil
		}
		done, err := a.event(data)
		data, lines = data[:0], 0
		return done, err
	}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// An event longer than the buffer: gather it whole.
			full := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
				if a.max > 0 && len(full) > a.max {
					return errStreamTooLarge
				}
			}
			line = full
		}
		text := bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) > 0 && len(text) == 0:
			// A blank line ends an event.
			if done, perr := dispatch(); perr != nil || done {
				return perr
			}
		case bytes.HasPrefix(text, []byte("data:")):
			if a.max > 0 && len(data)+len(text) > a.max {
				return errStreamTooLarge
			}
			if lines > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(text[len("data:"):], []byte(" "))...)
			lines++
		} // comments and event names
		if err == io.EOF {
			_, perr := dispatch()
			return perr
		}
		if err != nil {
			return err
		}
	}
}

// event handles one event's data; done reports [DONE].
func (a *streamAssembly) event(data []byte) (done bool, err error) {
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return true, nil
	}
	if err := rawjson.Check(data, a.maxDepth); err != nil {
		if errors.Is(err, rawjson.ErrTooDeep) {
			return false, &answerTooDeepError{limit: a.maxDepth}
		}
		return false, errors.New("an event's data is not valid JSON")
	}
	a.size += len(data)
	if a.max > 0 && a.size > a.max {
		return false, errStreamTooLarge
	}
	chunk := gjson.ParseBytes(data)
	if e := chunk.Get("error"); e.Exists() {
		return false, fmt.Errorf("the upstream sent an error event: %s", e.Get("message").String())
	}
	if !a.head.Exists() {
		a.head = gjson.Parse(string(data)) // a copy: data is the reader's buffer
	}
	if u := chunk.Get("usage"); u.IsObject() {
		a.usage = u.Raw
	}
	var live []byte
	chunk.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		idx := int(ch.Get("index").Int())
		if idx < 0 || idx > 127 {
			return true
		}
		for len(a.choices) <= idx {
			a.choices = append(a.choices, &choiceAssembly{})
		}
		c := a.choices[idx]
		d := ch.Get("delta")
		if r := d.Get("role").Str; r != "" {
			c.role = r
		}
		if ct := d.Get("content"); ct.Type == gjson.String {
			c.content.WriteString(ct.Str)
			c.hasContent = true
		}
		d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			k := int(tc.Get("index").Int())
			if k < 0 || k > 127 {
				return true
			}
			for len(c.calls) <= k {
				c.calls = append(c.calls, &toolCallAssembly{})
			}
			call := c.calls[k]
			if v := tc.Get("id").Str; v != "" {
				call.id = v
			}
			if v := tc.Get("type").Str; v != "" {
				call.typ = v
			}
			call.name += tc.Get("function.name").Str
			call.args.WriteString(tc.Get("function.arguments").Str)
			return true
		})
		if rc := d.Get("reasoning_content").Str; rc != "" {
			c.reasoning.WriteString(rc)
			live = a.appendReasoningEvent(live, chunk, idx, rc)
		}
		if f := ch.Get("finish_reason"); f.Exists() && f.Type != gjson.Null {
			c.finish = f.Raw
		}
		return true
	})
	if len(live) > 0 && a.live != nil {
		a.live.push(live)
	}
	return false, nil
}

// appendReasoningEvent renders one reasoning delta as a chunk event for the client.
func (a *streamAssembly) appendReasoningEvent(dst []byte, chunk gjson.Result, idx int, text string) []byte {
	dst = append(dst, `data: {"id":`...)
	dst = appendRawOr(dst, chunk.Get("id"), `"chatcmpl-factgate"`)
	dst = append(dst, `,"object":"chat.completion.chunk","created":`...)
	dst = appendRawOr(dst, chunk.Get("created"), "0")
	dst = append(dst, `,"model":`...)
	if a.model != "" {
		dst = rawjson.AppendString(dst, a.model)
	} else {
		dst = appendRawOr(dst, chunk.Get("model"), `""`)
	}
	dst = append(dst, `,"choices":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(idx), 10)
	dst = append(dst, `,"delta":{"role":"assistant","reasoning_content":`...)
	dst = rawjson.AppendString(dst, text)
	dst = append(dst, "},\"logprobs\":null,\"finish_reason\":null}]}\n\n"...)
	return dst
}

// completion assembles the chat.completion body.
func (a *streamAssembly) completion() []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"id":`...)
	b = appendRawOr(b, a.head.Get("id"), `"chatcmpl-factgate"`)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = appendRawOr(b, a.head.Get("created"), "0")
	b = append(b, `,"model":`...)
	b = appendRawOr(b, a.head.Get("model"), `""`)
	if sf := a.head.Get("system_fingerprint"); sf.Exists() {
		b = append(b, `,"system_fingerprint":`...)
		b = append(b, sf.Raw...)
	}
	b = append(b, `,"choices":[`...)
	if len(a.choices) == 0 {
		a.choices = append(a.choices, &choiceAssembly{})
	}
	for i, c := range a.choices {
		if i > 0 {
			b = append(b, ',')
		}
		role := c.role
		if role == "" {
			role = "assistant"
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"message":{"role":`...)
		b = rawjson.AppendString(b, role)
		b = append(b, `,"content":`...)
		if !c.hasContent && len(c.calls) > 0 {
			b = append(b, "null"...)
		} else {
			b = rawjson.AppendString(b, c.content.String())
		}
		if c.reasoning.Len() > 0 {
			b = append(b, `,"reasoning_content":`...)
			b = rawjson.AppendString(b, c.reasoning.String())
		}
		if len(c.calls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for k, call := range c.calls {
				if k > 0 {
					b = append(b, ',')
				}
				typ := call.typ
				if typ == "" {
					typ = "function"
				}
				b = append(b, `{"id":`...)
				b = rawjson.AppendString(b, call.id)
				b = append(b, `,"type":`...)
				b = rawjson.AppendString(b, typ)
				b = append(b, `,"function":{"name":`...)
				b = rawjson.AppendString(b, call.name)
				b = append(b, `,"arguments":`...)
				b = rawjson.AppendString(b, call.args.String())
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
		b = append(b, `},"finish_reason":`...)
		if c.finish == "" {
			b = append(b, "null"...)
		} else {
			b = append(b, c.finish...)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if a.usage != "" {
		b = append(b, `,"usage":`...)
		b = append(b, a.usage...)
	}
	return append(b, '}')
}

// withoutReasoning removes every choice's reasoning_content (already streamed
// live) from a chat.completion body.
func withoutReasoning(body []byte) []byte {
	n := len(gjson.GetBytes(body, "choices").Array())
	for i := range n {
		if b, err := sjson.DeleteBytes(body, "choices."+strconv.Itoa(i)+".message.reasoning_content"); err == nil {
			body = b
		}
	}
	return body
}
