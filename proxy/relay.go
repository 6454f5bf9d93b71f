package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// Live relay on a route with interceptors. The chain's request phases decide
// what the answer needs: a request the route's pack is not about (a greeting, a
// JSON-mode call, a tool step of another conversation) is neither validated nor
// revised, so no stage reads its answer (interceptors.AnswerHolder). A streaming
// client then gets that answer as the upstream streams it, event by event, as on
// a route without interceptors — not held and synthesized once complete. The
// events pass byte for byte, except for what factgate must change: the model with
// response_model alias, the app's own instructions in a Responses object (never
// the prompt factgate injected), the usage chunk factgate asked for on the
// client's behalf, and an event whose JSON the upstream wrote over several data
// lines (one line, as every client reads it). The response phases run once the
// stream ended, with its status, headers and usage (an A/B experiment counts the
// request); the trace is stored before the stream's last event goes out.

// liveHandoff is how the chain's goroutine gives a streaming request's relay to
// the connection's (intercept).
type liveHandoff struct {
	// decided is closed when the chain decided to relay the answer live: a held
	// stream is then no longer committed by the keep-alive timer, as a route
	// without interceptors sends nothing before the upstream's headers.
	decided chan struct{}
	// relays receives the relay (cap 1) once the upstream's stream began.
	relays chan *liveRelay
}

func newLiveHandoff() *liveHandoff {
	return &liveHandoff{decided: make(chan struct{}), relays: make(chan *liveRelay, 1)}
}

// liveStreamer is an Exchange's Upstream that can relay the request's own answer
// live: a 2xx event stream comes back as a relay whose body is still to be read;
// anything else (an error status, a provider that answered JSON to a stream
// request) as the answer read whole, as Complete returns it.
type liveStreamer interface {
	// canStreamLive reports whether ex's request can go upstream as a stream
	// (false: it takes the held path).
	canStreamLive(ex *interceptors.Exchange) bool
	streamLive(ctx context.Context, ex *interceptors.Exchange) (*liveRelay, *interceptors.Response, error)
}

// holdsAnswer reports whether an interceptor of chain (those whose request phase
// ran) needs ex's whole answer: a response phase that does not say otherwise
// (interceptors.AnswerHolder) does.
func holdsAnswer(chain []interceptors.Interceptor, ex *interceptors.Exchange) bool {
	for _, ic := range chain {
		if _, ok := ic.(interceptors.ResponsePhase); !ok {
			continue
		}
		if h, ok := ic.(interceptors.AnswerHolder); !ok || h.HoldsAnswer(ex) {
			return true
		}
	}
	return false
}

// relayLive streams ex's answer to the client through hand and waits until the
// stream ended; the answer (without a body: it went out as it came) or the
// failure is then the exchange's, for the response phases.
func (s *Server) relayLive(ctx context.Context, ex *interceptors.Exchange, ls liveStreamer, hand *liveHandoff) {
	ex.Trace.Note("relay: no stage reads this answer (the pack's contract does not apply to the request): it is streamed to the client as the upstream sends it")
	lr, whole, err := ls.streamLive(ctx, ex)
	if lr == nil {
		s.holdAnswer(ex, whole, err)
		return
	}
	hand.relays <- lr
	var end relayEnd
	select {
	case end = <-lr.ended:
	case <-ctx.Done():
		// The client went away: unless the connection's side took the relay (it
		// then ends it), nobody will read it.
		if lr.abandon() {
			end = relayEnd{clientGone: true}
		} else {
			end = <-lr.ended
		}
	}
	switch {
	case end.complete:
		ex.Response = &interceptors.Response{Status: lr.status, Header: lr.header, Duration: end.took}
		ex.Usage = ex.Usage.Add(end.usage)
		if !end.usageSeen {
			ex.Trace.Note("relay: the upstream's stream told no usage")
		}
	case end.clientGone:
		ex.UpstreamErr = context.Canceled
	default:
		ex.UpstreamErr = errStreamBroken
	}
}

// errStreamBroken is the failure of a relayed stream the upstream broke off.
var errStreamBroken = errors.New("the upstream's event stream broke off")

// canStreamLive implements liveStreamer: a chat completion always can.
func (c *routeCaller) canStreamLive(*interceptors.Exchange) bool { return true }

// canStreamLive implements liveStreamer: a Responses request whose chat view
// has messages to rebuild it from.
func (c *responsesCaller) canStreamLive(ex *interceptors.Exchange) bool {
	req, _, ok := c.rx.requestFor(ex.Body, ex.Body, true)
	c.liveRequest = req // streamLive sends it
	return ok
}

// streamLive implements liveStreamer for a chat completion: the chain's request
// as it is (stream true), asking for the usage when the client did not (askUsage;
// the usage chunk and the "usage":null members that asking adds are taken out
// again, as usageStripper does, by editData).
func (c *routeCaller) streamLive(ctx context.Context, ex *interceptors.Exchange) (*liveRelay, *interceptors.Response, error) {
	body, strip := askUsage([]byte(chatPath), ex.Body)
	lr, whole, err := c.streamAt(ctx, chatPath, body)
	if lr != nil {
		lr.stripUsage, lr.alias = strip, c.model
	}
	return lr, whole, err
}

// streamLive implements liveStreamer for a Responses request on an api:
// responses upstream: the client's request as the chain edited it, streamed.
func (c *responsesCaller) streamLive(ctx context.Context, ex *interceptors.Exchange) (*liveRelay, *interceptors.Response, error) {
	req := c.liveRequest
	if req == nil {
		var ok bool
		if req, _, ok = c.rx.requestFor(ex.Body, ex.Body, true); !ok {
			return nil, nil, errors.New("the Responses request could not be rebuilt from the chain's")
		}
	}
	lr, whole, err := c.inner.streamAt(ctx, responsesPath, req)
	if lr != nil {
		lr.rx, lr.alias = c.rx, c.rx.alias
	}
	return lr, whole, err
}

// streamAt POSTs body to path for a stream (see liveStreamer).
func (c *routeCaller) streamAt(ctx context.Context, path string, body []byte) (*liveRelay, *interceptors.Response, error) {
	start := c.begin()
	sp := c.plan(path, body, func(h *fasthttp.ResponseHeader) bool { return isEventStream(h.ContentType()) })
	res := c.send(ctx, &sp)
	if res.err != nil {
		c.end(start)
		return nil, nil, res.err
	}
	status := res.resp.StatusCode()
	if res.cl == nil || !res.cl.stream || status < 200 || status > 299 {
		if res.cl != nil && res.cl.stream {
			// An error status with an event stream: its body, read whole.
			b, err := io.ReadAll(io.LimitReader(res.cl.body(), int64(c.maxBody)+1))
			if err != nil || len(b) > c.maxBody {
				res.close(false)
				c.end(start)
				return nil, nil, fmt.Errorf("reading the upstream's %d answer: %w", status, errors.Join(err, errStreamTooLarge))
			}
			res.resp.SetBody(b)
			res.call.Answer(status, b)
			res.call = nil
			res.cl.Close(true)
			res.cl = nil
		}
		return nil, c.whole(&res, c.end(start)), nil
	}
	lr := &liveRelay{caller: c, ctx: ctx, res: res, start: start, status: status, header: upstreamHeaders(&res.resp.Header),
		up: sp.targets[min(res.served, len(sp.targets)-1)].up, body: res.cl.body(), ended: make(chan relayEnd, 1), max: c.maxBody}
	return lr, nil, nil
}

// relayEnd is how a relayed stream ended, for the chain's goroutine.
type relayEnd struct {
	complete, clientGone bool
	usage                interceptors.Usage
	usageSeen            bool
	took                 time.Duration
}

// liveRelay is the body of a streaming client's answer relayed live: fasthttp
// reads it on the connection's goroutine and writes each Read as a flushed
// chunk. It reads the upstream's stream, splits it into events and passes each
// on as it completes (edited where it must be, see above). The stream's last
// event ([DONE], response.completed) waits until the response phases ran and the
// trace is stored.
type liveRelay struct {
	caller *routeCaller
	ctx    context.Context // the request's: its cause tells a client that went away
	res    sendResult
	// owner is who ends the relay: 0 nobody yet, 1 the connection's side (take),
	// 2 the chain's, which abandoned it (abandon).
	owner  atomic.Int32
	up     *upstream // served the stream: its breaker hears of a break
	start  time.Time
	status int
	header [][2]string
	body   io.Reader
	max    int // server.max_response_body: the longest event

	// Set before the relay is handed over.
	stripUsage bool               // take out the usage factgate asked for
	alias      string             // the model the events carry ("": the upstream's)
	rx         *responsesExchange // a Responses stream; nil for chat chunks

	// Set by the connection's side when it takes the relay (attach).
	done      <-chan outcome
	saveTrace func()
	finish    func(status int, code string, delivered bool)

	ended    chan relayEnd
	buf      []byte // the upstream's bytes not yet split into events
	scanned  int    // buf[:scanned] holds no complete event
	pending  []byte // events for the client
	held     []byte // the last event(s), held until the trace is stored
	terminal bool   // the last event was seen: the ones after it are held too
	usage    interceptors.Usage
	hasUsage bool
	signaled bool // ended was sent
	outcome  bool // done was received
	eof      bool
	readErr  error // the upstream's stream failed: told once pending is out
	broken   bool
	closed   bool
	readBuf  []byte
}

// take makes the relay the connection's to read and end; false when the chain
// abandoned it (the client went away first).
func (lr *liveRelay) take() bool { return lr.owner.CompareAndSwap(0, 1) }

// abandon ends a relay nobody took; false when the connection's side has it.
func (lr *liveRelay) abandon() bool {
	if !lr.owner.CompareAndSwap(0, 2) {
		return false
	}
	lr.res.call.EndStream(false, "cancelled")
	lr.res.close(false)
	lr.caller.end(lr.start)
	return true
}

// attach makes the relay report to the connection's side of the request.
func (lr *liveRelay) attach(done <-chan outcome, saveTrace func(), finish func(status int, code string, delivered bool)) {
	lr.done, lr.saveTrace, lr.finish = done, saveTrace, finish
}

// end tells the chain's goroutine how the stream ended (once) and waits for the
// response phases; when the stream is complete, the trace is then stored and the
// held events follow.
func (lr *liveRelay) end(complete, clientGone bool) {
	if !lr.signaled {
		lr.signaled = true
		if clientGone {
			lr.res.call.EndStream(complete, "cancelled")
		}
		lr.res.close(complete)
		took := lr.caller.end(lr.start)
		if !complete && !clientGone {
			// Too late to retry (the client has part of the answer), but the
			// breaker hears of it.
			lr.up.breaker.record(false, verdictFailure, time.Now())
		}
		lr.ended <- relayEnd{complete: complete, clientGone: clientGone, usage: lr.usage, usageSeen: lr.hasUsage, took: took}
	}
	if !lr.outcome {
		lr.outcome = true
		<-lr.done
		if lr.saveTrace != nil {
			lr.saveTrace()
		}
	}
}

func (lr *liveRelay) Read(p []byte) (int, error) {
	for len(lr.pending) == 0 {
		switch {
		case lr.eof && lr.held != nil:
			lr.pending, lr.held = lr.held, nil
			continue
		case lr.eof:
			return 0, io.EOF
		case lr.readErr != nil:
			gone := context.Cause(lr.ctx) == errClientGone
			lr.broken = !gone
			lr.end(false, gone)
			return 0, lr.readErr
		}
		if lr.readBuf == nil {
			lr.readBuf = make([]byte, 16<<10)
		}
		n, err := lr.body.Read(lr.readBuf)
		if n > 0 {
			lr.res.call.Stream(lr.readBuf[:n]) // the call's span, with tracing on
			if perr := lr.feed(lr.readBuf[:n]); perr != nil {
				err = perr
			}
		}
		if err != nil {
			// What is left of an event the upstream did not end goes as it came
			// (the events held back too, when the stream ended), then the end or
			// the failure.
			lr.pending = append(lr.pending, lr.buf...)
			lr.buf = lr.buf[:0]
			if err == io.EOF {
				lr.end(true, false)
				lr.eof = true
			} else {
				lr.pending = append(lr.pending, lr.held...)
				lr.held = nil
				lr.readErr = err
			}
		}
	}
	n := copy(p, lr.pending)
	lr.pending = lr.pending[n:]
	return n, nil
}

// CloseWithError is called by fasthttp when the body is written or the client
// went away (werr).
func (lr *liveRelay) CloseWithError(werr error) error {
	if lr.closed {
		return nil
	}
	lr.closed = true
	complete := lr.eof && werr == nil
	clientGone := (werr != nil && !lr.broken) || (!complete && context.Cause(lr.ctx) == errClientGone)
	if clientGone && lr.caller.trace != nil {
		lr.caller.trace.Note("relay: the client went away before the stream's end")
	}
	lr.end(complete, clientGone)
	switch {
	case complete:
		lr.finish(lr.status, "", true)
	case clientGone:
		lr.finish(StatusClientClosed, "client_closed_request", false)
	default:
		lr.finish(fasthttp.StatusBadGateway, "upstream_stream_broken", false)
	}
	return nil
}

// feed adds the upstream's bytes and relays every event they complete.
func (lr *liveRelay) feed(p []byte) error {
	lr.buf = append(lr.buf, p...)
	start := 0
	for {
		n := eventLen(lr.buf[start:], &lr.scanned)
		if n == 0 {
			break
		}
		lr.relayEvent(lr.buf[start : start+n])
		start += n
		lr.scanned = 0
	}
	if start > 0 {
		lr.buf = append(lr.buf[:0], lr.buf[start:]...)
	}
	if lr.max > 0 && len(lr.buf) > lr.max {
		return errStreamTooLarge
	}
	return nil
}

// eventLen returns the length of the first complete event in b — its lines
// through the blank line that ends it, lines ending in "\n", "\r\n" or "\r" — or
// 0 when it is not complete yet. *scanned is where the previous call left off
// (0 for a new event), updated so that a long event is not scanned again.
func eventLen(b []byte, scanned *int) int {
	i := *scanned
	lineStart := i
	// scanned always stops at a line's start.
	for i < len(b) {
		c := b[i]
		if c != '\n' && c != '\r' {
			i++
			continue
		}
		end := i + 1
		if c == '\r' {
			if end == len(b) {
				break // a "\r\n" may be cut in two: wait for the next byte
			}
			if b[end] == '\n' {
				end++
			}
		}
		if i == lineStart {
			return end
		}
		lineStart, i = end, end
		*scanned = lineStart
	}
	return 0
}

// relayEvent relays one complete event (raw: its lines and the blank line).
func (lr *liveRelay) relayEvent(raw []byte) {
	data, lines := eventData(raw)
	if lines == 0 { // comments, blank lines
		lr.emit(raw)
		return
	}
	out, drop := lr.editData(data)
	switch {
	case drop:
	case lines == 1 && out == nil:
		lr.emit(raw)
	case out == nil:
		lr.emit(withData(raw, data))
	default:
		lr.emit(withData(raw, out))
	}
}

// eventData returns an event's data — its data lines' values joined with
// newlines, as an SSE client reads them — and how many data lines it has.
func eventData(raw []byte) (data []byte, lines int) {
	eachLine(raw, func(line []byte) {
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			return
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if lines == 0 {
			data = value // a view of raw: one line is the usual event
		} else {
			if lines == 1 {
				data = append([]byte(nil), data...)
			}
			data = append(append(data, '\n'), value...)
		}
		lines++
	})
	return data, lines
}

// withData is the event raw with data as its one data line (made one line): its
// other lines as they came, the data where its first data line was.
func withData(raw, data []byte) []byte {
	ev := make([]byte, 0, len(raw)+8)
	wrote := false
	eachLine(raw, func(line []byte) {
		if field, _, _ := bytes.Cut(line, []byte(":")); string(field) == "data" {
			if wrote {
				return
			}
			wrote = true
			ev = append(ev, "data: "...)
			ev = append(ev, oneLine(data)...)
		} else {
			ev = append(ev, line...)
		}
		ev = append(ev, '\n')
	})
	return append(ev, '\n')
}

// eventFramer passes an event stream on as it is read, each event once it is
// complete and byte for byte, but for an event whose data the upstream wrote
// over several data lines — valid SSE that go-openai, which reads a line at a
// time, cannot read —, which goes with its data on one line. A route without
// interceptors relays its chat completion and Responses streams through it.
//
// It reads into one buffer and returns complete events from it in place: an
// event is only looked at for its line starts (bytes.IndexByte), and copied
// only when it is reframed. Lines end in "\n" (or "\r\n"); a stream whose lines
// end in a lone "\r" (valid SSE, which no provider sends) is passed on as it
// comes from its first such line on.
type eventFramer struct {
	r   io.Reader
	max int // the longest event (0: unbounded)
	// buf[off:done] are complete events to return; buf[done:] the event being
	// read, split into lines up to scan; event is where it starts and data counts
	// its data lines so far.
	buf                    []byte
	off, done, scan, event int
	data                   int
	raw                    bool // pass the rest on as it comes
	err                    error
}

func (f *eventFramer) Read(p []byte) (int, error) {
	for f.done == f.off {
		if f.err != nil {
			if f.off < len(f.buf) {
				// What the upstream sent of an event it did not end goes as it
				// came, then its end or its failure.
				f.done = len(f.buf)
				break
			}
			f.release()
			return 0, f.err
		}
		f.fill()
	}
	n := copy(p, f.buf[f.off:f.done])
	f.off += n
	return n, nil
}

// framerBuffers pools the framers' buffers: a streamed answer needs one for
// its time only.
var framerBuffers = sync.Pool{New: func() any { return new([]byte) }}

// release gives the buffer back once the stream is read to its end; nothing
// reads it after.
func (f *eventFramer) release() {
	if f.buf != nil && cap(f.buf) <= 64<<10 {
		b := f.buf[:0]
		framerBuffers.Put(&b)
	}
	f.buf, f.off, f.done, f.scan, f.event = nil, 0, 0, 0, 0
}

// fill reads more of the stream and splits what it got.
func (f *eventFramer) fill() {
	if f.buf == nil {
		f.buf = (*framerBuffers.Get().(*[]byte))[:0]
	}
	if f.off == len(f.buf) {
		f.buf, f.off, f.done, f.scan, f.event = f.buf[:0], 0, 0, 0, 0
	} else if f.off > 0 && f.off >= cap(f.buf)/2 {
		k := copy(f.buf, f.buf[f.off:])
		f.buf = f.buf[:k]
		f.done, f.scan, f.event, f.off = f.done-f.off, f.scan-f.off, f.event-f.off, 0
	}
	if cap(f.buf)-len(f.buf) < 4<<10 {
		f.buf = slices.Grow(f.buf, max(8<<10, len(f.buf)))
	}
	n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
	f.buf = f.buf[:len(f.buf)+n]
	f.split()
	switch {
	case err != nil:
		f.err = err
	case f.max > 0 && len(f.buf)-f.event > f.max:
		f.err = errStreamTooLarge
	}
}

// split finds the events the new bytes complete.
func (f *eventFramer) split() {
	if f.raw {
		f.done = len(f.buf)
		return
	}
	for {
		i := bytes.IndexByte(f.buf[f.scan:], '\n')
		if i < 0 {
			// No line feed: a "\r" that is not the end of the bytes read is a
			// lone one, which this framer does not split on.
			if cr := bytes.IndexByte(f.buf[f.scan:], '\r'); cr >= 0 && f.scan+cr+1 < len(f.buf) {
				f.raw, f.done = true, len(f.buf)
			}
			return
		}
		line, next := f.buf[f.scan:f.scan+i], f.scan+i+1
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0:
			if f.data > 1 {
				raw := f.buf[f.event:next]
				data, _ := eventData(raw)
				ev := withData(raw, data)
				rest := append(ev, f.buf[next:]...)
				f.buf = append(f.buf[:f.event], rest...)
				next = f.event + len(ev)
			}
			f.done, f.event, f.data = next, next, 0
		case bytes.HasPrefix(line, []byte("data:")):
			f.data++
		}
		f.scan = next
	}
}

// emit queues an event for the client; from the stream's last event on
// (holdLast), they wait for the trace.
func (lr *liveRelay) emit(ev []byte) {
	if lr.terminal {
		lr.held = append(lr.held, ev...)
		return
	}
	lr.pending = append(lr.pending, ev...)
}

// holdLast marks the event being read as the stream's last: it and what follows
// wait until the trace is stored.
func (lr *liveRelay) holdLast() { lr.terminal = true }

// editData reads one event's data: the usage it carries, whether it is the
// stream's last event (holdLast), and what factgate changes in it (out nil:
// nothing; drop: the event does not go to the client).
func (lr *liveRelay) editData(data []byte) (out []byte, drop bool) {
	if lr.rx != nil {
		return lr.editResponsesEvent(data), false
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		lr.holdLast()
		return nil, false
	}
	if !gjson.ValidBytes(data) {
		return nil, false
	}
	if u := gjson.GetBytes(data, "usage"); u.IsObject() {
		lr.usage, lr.hasUsage = interceptors.ParseUsage(data), true
		if lr.stripUsage && len(gjson.GetBytes(data, "choices").Array()) == 0 {
			return nil, true // the usage chunk the client did not ask for
		}
	} else if lr.stripUsage && u.Type == gjson.Null && u.Exists() {
		if b, err := sjson.DeleteBytes(data, "usage"); err == nil {
			out = b
		}
	}
	if lr.alias != "" {
		if m := gjson.GetBytes(data, "model"); m.Exists() && m.Str != lr.alias {
			if out == nil {
				out = data
			}
			if b, err := sjson.SetBytes(out, "model", lr.alias); err == nil {
				out = b
			}
		}
	}
	return out, false
}

// editResponsesEvent is editData for a Responses event: an event carrying the
// response object echoes the app's own instructions and, with response_model
// alias, the alias; the terminal event's response carries the usage.
func (lr *liveRelay) editResponsesEvent(data []byte) []byte {
	if !gjson.ValidBytes(data) {
		return nil
	}
	typ := gjson.GetBytes(data, "type").Str
	switch typ {
	case "response.completed", "response.incomplete", "response.failed", "error":
		lr.holdLast()
		if u := gjson.GetBytes(data, "response.usage"); u.IsObject() {
			in, o := int(u.Get("input_tokens").Int()), int(u.Get("output_tokens").Int())
			total := int(u.Get("total_tokens").Int())
			if total == 0 {
				total = in + o
			}
			lr.usage, lr.hasUsage = interceptors.Usage{PromptTokens: in, CompletionTokens: o, TotalTokens: total}, true
		}
	}
	if !gjson.GetBytes(data, "response").IsObject() {
		return nil
	}
	var out []byte
	if b := lr.rx.ownInstructions(data, "response.instructions"); !sameBytes(b, data) {
		out = b
		if lr.terminal && lr.rx.remember != nil {
			// The stored response (when the provider stores it) has factgate's
			// instructions.
			lr.rx.remember(lr.caller.trace, []byte(gjson.GetBytes(data, "response").Raw), lr.rx.instructions())
		}
	}
	if lr.alias != "" {
		if m := gjson.GetBytes(data, "response.model"); m.Exists() && m.Str != lr.alias {
			if out == nil {
				out = data
			}
			if b, err := sjson.SetBytes(out, "response.model", lr.alias); err == nil {
				out = b
			}
		}
	}
	return out
}

// sameBytes reports whether a and b are the same slice.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// eachLine calls fn with every line of an event (without its line ending),
// the blank line that ends it aside.
func eachLine(raw []byte, fn func(line []byte)) {
	for len(raw) > 0 {
		i := bytes.IndexAny(raw, "\r\n")
		if i < 0 {
			fn(raw)
			return
		}
		if i > 0 {
			fn(raw[:i])
		}
		if raw[i] == '\r' && i+1 < len(raw) && raw[i+1] == '\n' {
			i++
		}
		raw = raw[i+1:]
	}
}

// Interface guards.
var (
	_ liveStreamer = (*routeCaller)(nil)
	_ liveStreamer = (*responsesCaller)(nil)
)
