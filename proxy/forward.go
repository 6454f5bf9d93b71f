package proxy

import (
	"context"
	"io"
	"time"

	"github.com/valyala/fasthttp"
)

// isStreamed decides whether an upstream response is relayed while it arrives:
// event streams always, bodies of unknown or large size too.
func isStreamed(h *fasthttp.ResponseHeader) bool {
	if isEventStream(h.ContentType()) {
		return true
	}
	cl := h.ContentLength()
	return cl < 0 || cl > 1<<20
}

// forward relays one request to up and the answer back, streaming when the
// answer is a stream or large.
func (s *Server) forward(rc *fasthttp.RequestCtx, up *upstream, rm *routeMetrics, body []byte, start time.Time, client string) {
	s.forwardEdited(rc, up, rm, body, start, client, nil)
}

// forwardEdited is forward with an edit of the answer: when edit is not nil, an
// answer that is not an event stream is read whole (bounded by
// server.max_response_body), uncompressed, and edit returns the body the client
// gets (edit must return its input when it has nothing to change).
func (s *Server) forwardEdited(rc *fasthttp.RequestCtx, up *upstream, rm *routeMetrics, body []byte, start time.Time, client string, edit func(status int, body []byte) []byte) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	req.Header.SetMethodBytes(rc.Method())
	uri := up.targetURI(make([]byte, 0, 64), rc.Path(), rc.URI().QueryString())
	req.Header.SetRequestURIBytes(uri)
	s.copyRequestHeaders(&req.Header, &rc.Request.Header, up, false, false)
	req.SetBodyRaw(body)
	streamed, maxBody := isStreamed, 0
	if edit != nil {
		// A compressed body could not be edited.
		req.Header.Del("Accept-Encoding")
		streamed = func(h *fasthttp.ResponseHeader) bool { return isEventStream(h.ContentType()) }
		maxBody = int(s.cfg.Server.MaxResponseBody)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	wc, _ := rc.Conn().(*watchConn)
	if wc != nil {
		wc.arm(cancel)
	}
	upStart := time.Now()
	cl, err := up.do(ctx, req, resp, streamed, maxBody)
	fasthttp.ReleaseRequest(req)
	if err != nil {
		if wc != nil {
			wc.disarm()
		}
		if context.Cause(ctx) == errClientGone {
			err = context.Canceled
		}
		cancel(nil)
		fasthttp.ReleaseResponse(resp)
		e := upstreamError(up.name, err)
		rm.error(e.Code)
		total := time.Since(start)
		rm.observe(e.Status, total, time.Since(upStart))
		writeError(rc, e)
		rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total-time.Since(upStart)))
		s.logAccess(rm.name, rc, e.Status, total, time.Since(upStart), client, e.Code)
		return
	}
	upHeaders := time.Since(upStart)
	copyResponseHeaders(&rc.Response.Header, &resp.Header)
	if !cl.stream {
		out := resp.Body()
		if edit != nil && len(resp.Header.ContentEncoding()) == 0 {
			out = edit(resp.StatusCode(), out)
		}
		rc.Response.SetBody(out)
		cl.Close(true)
		fasthttp.ReleaseResponse(resp)
		if wc != nil {
			wc.disarm()
		}
		cancel(nil)
		total := time.Since(start)
		rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(total-upHeaders))
		rm.observe(rc.Response.StatusCode(), total, upHeaders)
		s.logAccess(rm.name, rc, rc.Response.StatusCode(), total, upHeaders, client, "")
		return
	}
	overhead := time.Since(start) - upHeaders
	rc.Response.Header.Set("X-Factgate-Overhead", formatOverhead(overhead))
	status := rc.Response.StatusCode()
	// fasthttp reads the body from relayBody on the connection's goroutine and writes
	// each read as one flushed chunk, so events reach the client as they arrive.
	rc.Response.SetBodyStream(&relayBody{cl: cl, r: cl.body(), done: func(complete, clientGone bool) {
		cl.Close(complete)
		fasthttp.ReleaseResponse(resp)
		if wc != nil {
			wc.disarm()
		}
		// A client that hangs up right after the last byte can be seen by the
		// disconnect probe before fasthttp reports the body written: it got it all.
		if !complete && context.Cause(ctx) == errClientGone {
			clientGone = true
		}
		cancel(nil)
		total := time.Since(start)
		// The client saw the upstream's status; the log and the metrics record how
		// the answer ended.
		st, code := status, ""
		switch {
		case clientGone:
			st, code = StatusClientClosed, "client_closed_request"
		case !complete:
			st, code = fasthttp.StatusBadGateway, "upstream_stream_broken"
		}
		if code != "" {
			rm.error(code)
		}
		rm.observe(st, total, total-overhead)
		s.logAccess(rm.name, rc, st, total, total-overhead, client, code)
	}}, -1)
}

// relayBody is the client response body of a streamed pass-through: it reads the
// upstream body. When the upstream breaks off, its Read returns the error and
// fasthttp closes the client connection without the final chunk, so the client
// sees a truncated stream rather than a clean end.
type relayBody struct {
	cl     *call
	r      io.Reader
	eof    bool
	broken bool // the upstream read failed
	closed bool
	done   func(complete, clientGone bool)
}

func (b *relayBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	} else if err != nil {
		b.broken = true
	}
	return n, err
}

// CloseWithError is called by fasthttp once the body is written or writing failed
// (werr: the client went away).
func (b *relayBody) CloseWithError(werr error) error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.done(b.eof && werr == nil, werr != nil && !b.broken)
	return nil
}
