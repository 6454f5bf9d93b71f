package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// upstream is one configured provider: a pool of HTTP/1.1 connections to its base
// URL, bounded in concurrency, with per-call cancellation.
//
// It speaks HTTP with fasthttp's Request/Response codecs over connections it owns,
// rather than through fasthttp.HostClient, so that a cancelled context (the client
// went away) closes exactly the connection of that call, and so that a response
// body can be streamed while it arrives.
type upstream struct {
	name string
	// okAttempts is factgate_upstream_attempts_total{upstream,outcome="ok"} of
	// this upstream's server, looked up at its first successful attempt (so that
	// the series appears only once there is one) instead of at every one.
	okAttempts atomic.Pointer[prometheus.Counter]
	scheme     string
	dialAddr   string // host:port
	hostHeader string
	pathPrefix string // base URL path without trailing slash ("/v1")
	tlsConfig  *tls.Config
	// responsesAPI: the upstream serves /v1/responses itself (api: responses);
	// otherwise Responses requests are translated to chat completions.
	responsesAPI bool
	// keys are the provider keys (api_key_env, or the pool of api_key_envs); an
	// empty pool sends no key of its own.
	keys        *keyPool
	keyCooldown time.Duration
	retry       retryPolicy
	breaker     *breaker

	connectTimeout time.Duration
	readTimeout    time.Duration
	writeTimeout   time.Duration
	idleTimeout    time.Duration
	maxIdle        int

	sem chan struct{} // nil = unbounded

	mu   sync.Mutex
	idle []*upConn
}

type upConn struct {
	net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer // writes through Write, which counts
	lastUsed time.Time
	reused   bool
	peek     *sockPeek
	// written counts the bytes of the current request the connection accepted:
	// once it is not zero the upstream may have the request, and it is never
	// sent again.
	written int
	// tcp is the plain TCP connection under Conn (nil under TLS): a large request
	// goes out on it with one writev (writeRequest).
	tcp *net.TCPConn
	// head is the request header of the last writev, kept for its capacity.
	head []byte
	// bufs and iov are the last writev's buffers: net.Buffers.WriteTo takes a
	// pointer and consumes the slice, so a local one would be allocated on every
	// request.
	bufs net.Buffers
	iov  [2][]byte
}

// writeRequest sends req. A body larger than what the write buffer has room for
// leaves together with its header in one writev on a plain TCP connection:
// through the buffer it took two writes — the header with the first buffer's worth
// of body, then the rest — that is two segments and two wakeups of the upstream
// for every request with injected knowledge, and one more syscall here. The bytes
// on the wire are the ones req.Write produces.
func (c *upConn) writeRequest(req *fasthttp.Request) error {
	body := req.Body()
	if c.tcp == nil || req.IsBodyStream() || len(body) <= c.bw.Available() || len(req.Header.Host()) == 0 || c.bw.Buffered() > 0 {
		if err := req.Write(c.bw); err != nil {
			return err
		}
		return c.bw.Flush()
	}
	// What req.Write does for a request with a Host header and a body in memory.
	req.Header.SetContentLength(len(body))
	c.head = req.Header.AppendBytes(c.head[:0])
	c.iov = [2][]byte{c.head, body}
	c.bufs = c.iov[:]
	n, err := c.bufs.WriteTo(c.tcp)
	c.written += int(n)
	c.iov, c.bufs = [2][]byte{}, nil // not keeping the body alive
	return err
}

func (c *upConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written += n
	return n, err
}

func newUpstream(name string, cfg UpstreamConfig) (*upstream, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: base_url %q: %w", name, cfg.BaseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("upstream %q: base_url %q: scheme must be http or https", name, cfg.BaseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("upstream %q: base_url %q has no host", name, cfg.BaseURL)
	}
	host := u.Host
	dial := host
	if u.Port() == "" {
		if u.Scheme == "https" {
			dial = net.JoinHostPort(u.Hostname(), "443")
		} else {
			dial = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	up := &upstream{
		name:           name,
		scheme:         u.Scheme,
		dialAddr:       dial,
		hostHeader:     host,
		pathPrefix:     strings.TrimRight(u.EscapedPath(), "/"),
		connectTimeout: time.Duration(cfg.ConnectTimeout),
		readTimeout:    time.Duration(cfg.ReadTimeout),
		writeTimeout:   time.Duration(cfg.WriteTimeout),
		idleTimeout:    time.Duration(cfg.IdleTimeout),
		maxIdle:        cfg.MaxIdleConns,
		responsesAPI:   cfg.API == APIResponses,
	}
	if u.Scheme == "https" {
		up.tlsConfig = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	}
	if cfg.MaxConcurrent > 0 {
		up.sem = make(chan struct{}, cfg.MaxConcurrent)
	}
	up.keys = &keyPool{}
	for _, k := range cfg.KeyEnvs() {
		if v := os.Getenv(k.Env); v != "" {
			up.keys.keys = append(up.keys.keys, &poolKey{env: k.Env, value: v, weight: max(k.Weight, defaultAPIKeyWeight)})
		}
	}
	if len(up.keys.keys) > maxPoolKeys {
		return nil, fmt.Errorf("upstream %q: %d keys: at most %d", name, len(up.keys.keys), maxPoolKeys)
	}
	up.keyCooldown = time.Duration(cfg.KeyCooldown)
	if up.keyCooldown <= 0 {
		up.keyCooldown = DefaultKeyCooldown
	}
	up.retry = cfg.Retry.policy(nil)
	failures := DefaultBreakerFailures
	if cfg.Breaker.Failures != nil {
		failures = *cfg.Breaker.Failures
	}
	cooldown := time.Duration(cfg.Breaker.Cooldown)
	if cooldown <= 0 {
		cooldown = DefaultBreakerCooldown
	}
	up.breaker = &breaker{threshold: failures, cooldown: cooldown}
	return up, nil
}

// targetURI maps a client request path under /v1 onto the upstream's base URL:
// "/v1/chat/completions" -> "<base path>/chat/completions". Paths outside /v1 are
// forwarded as they are, to the upstream's origin.
func (u *upstream) targetURI(dst []byte, path, query []byte) []byte {
	dst = dst[:0]
	if rest, ok := cutV1(path); ok {
		dst = append(dst, u.pathPrefix...)
		dst = append(dst, rest...)
	} else {
		dst = append(dst, path...)
	}
	if len(query) > 0 {
		dst = append(dst, '?')
		dst = append(dst, query...)
	}
	return dst
}

func cutV1(path []byte) ([]byte, bool) {
	if len(path) >= 3 && path[0] == '/' && path[1] == 'v' && path[2] == '1' {
		if len(path) == 3 {
			return path[:0], true
		}
		if path[3] == '/' {
			return path[3:], true
		}
	}
	return nil, false
}

// errUpstreamBusy is returned when the concurrency bound stayed full for the
// whole connect timeout.
var errUpstreamBusy = errors.New("too many concurrent upstream requests")

// callWatch closes a call's connection when the call's context ends (the client
// went away, a deadline passed): through the request's own context when the call
// runs on it, else with context.AfterFunc.
type callWatch struct {
	req   *requestCtx
	c     *upConn
	after func() bool // context.AfterFunc's stop
}

// watchCall starts watching the call on c; stop ends it.
func watchCall(ctx context.Context, c *upConn) callWatch {
	if r, ok := ctx.(*requestCtx); ok {
		r.watch(c)
		return callWatch{req: r, c: c}
	}
	return callWatch{after: context.AfterFunc(ctx, func() { _ = c.Close() })}
}

// stop stops watching. It reports false when the context ended first: the
// connection is closed, or being closed.
func (w callWatch) stop() bool {
	if w.req != nil {
		return w.req.unwatch(w.c)
	}
	return w.after()
}

// call is one upstream exchange in progress. Close must be called exactly once.
type call struct {
	u      *upstream
	c      *upConn
	watch  callWatch
	resp   *fasthttp.Response
	stream bool
	ctx    context.Context
}

// do sends req and reads the response headers. With stream false it also reads the
// whole body (bounded by maxBody); with stream true the body is left to be read from
// call.body(). The caller must Close the call.
func (u *upstream) do(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response, stream func(*fasthttp.ResponseHeader) bool, maxBody int) (*call, error) {
	if u.sem != nil {
		select {
		case u.sem <- struct{}{}:
		default:
			t := time.NewTimer(u.connectTimeout)
			select {
			case u.sem <- struct{}{}:
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
				return nil, errUpstreamBusy
			}
		}
	}
	cl, err := u.roundTrip(ctx, req, resp, stream, maxBody, true)
	if err != nil && u.sem != nil {
		<-u.sem
	}
	return cl, err
}

func (u *upstream) roundTrip(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response, stream func(*fasthttp.ResponseHeader) bool, maxBody int, mayRetry bool) (*call, error) {
	c, err := u.getConn(ctx)
	if err != nil {
		return nil, err
	}
	c.written = 0
	watch := watchCall(ctx, c)
	fail := func(err error) (*call, error) {
		watch.stop()
		_ = c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// getConn already dropped pooled connections the upstream closed while
		// idle. One that still fails before it took a byte of the request (the
		// close raced the check) is tried once more on a fresh connection. Once a
		// byte was written the upstream may have read, and billed, the whole
		// request: a chat completion is not idempotent, so it is never re-sent.
		if mayRetry && c.reused && c.written == 0 && isStaleConnError(err) {
			return u.roundTrip(ctx, req, resp, stream, maxBody, false)
		}
		return nil, err
	}
	if u.writeTimeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(u.writeTimeout))
	}
	if err := c.writeRequest(req); err != nil {
		return fail(err)
	}
	if u.readTimeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(u.readTimeout))
	}
	resp.Reset()
	if err := readResponseHeader(resp, c.br); err != nil {
		return fail(err)
	}
	cl := &call{u: u, c: c, watch: watch, resp: resp, ctx: ctx}
	if stream != nil && stream(&resp.Header) {
		resp.StreamBody = true
		if err := resp.ReadBody(c.br, 0); err != nil {
			cl.closeConn()
			return nil, err
		}
		cl.stream = true
		return cl, nil
	}
	if err := resp.ReadBody(c.br, maxBody); err != nil {
		cl.closeConn()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if resp.Header.ContentLength() == -1 {
		if err := resp.Header.ReadTrailer(c.br); err != nil && err != io.EOF {
			cl.closeConn()
			return nil, err
		}
	}
	return cl, nil
}

// readResponseHeader reads the status line and headers, skipping 1xx responses.
func readResponseHeader(resp *fasthttp.Response, br *bufio.Reader) error {
	for n := 0; n < 10; n++ {
		if err := resp.Header.Read(br); err != nil {
			return err
		}
		sc := resp.Header.StatusCode()
		if sc < 100 || sc > 199 || sc == fasthttp.StatusSwitchingProtocols {
			return nil
		}
	}
	return errors.New("too many informational responses")
}

// body returns the streamed response body; each Read renews the read deadline.
func (cl *call) body() io.Reader { return deadlineReader{cl} }

type deadlineReader struct{ cl *call }

func (d deadlineReader) Read(p []byte) (int, error) {
	if d.cl.u.readTimeout > 0 {
		_ = d.cl.c.SetReadDeadline(time.Now().Add(d.cl.u.readTimeout))
	}
	n, err := d.cl.resp.BodyStream().Read(p)
	if err != nil && err != io.EOF && d.cl.ctx.Err() != nil {
		err = d.cl.ctx.Err()
	}
	return n, err
}

// Close ends the call. complete reports that the body was read to its end, so the
// connection may be reused.
func (cl *call) Close(complete bool) {
	if cl.stream {
		if !complete {
			cl.closeConn()
		}
		_ = cl.resp.CloseBodyStream()
	}
	if cl.c != nil {
		if !cl.watch.stop() || !complete || cl.resp.ConnectionClose() || cl.resp.Header.ContentLength() == -2 {
			cl.closeConn()
		} else {
			cl.u.putConn(cl.c)
			cl.c = nil
		}
	}
	if cl.u.sem != nil {
		<-cl.u.sem
	}
}

func (cl *call) closeConn() {
	if cl.c != nil {
		cl.watch.stop()
		_ = cl.c.Close()
		cl.c = nil
	}
}

func (u *upstream) getConn(ctx context.Context) (*upConn, error) {
	now := time.Now()
	u.mu.Lock()
	for n := len(u.idle); n > 0; n = len(u.idle) {
		c := u.idle[n-1]
		u.idle = u.idle[:n-1]
		u.mu.Unlock()
		if (u.idleTimeout > 0 && now.Sub(c.lastUsed) > u.idleTimeout) || !idleConnUsable(c) {
			_ = c.Close()
			u.mu.Lock()
			continue
		}
		c.reused = true
		return c, nil
	}
	u.mu.Unlock()

	d := net.Dialer{Timeout: u.connectTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", u.dialAddr)
	if err != nil {
		return nil, &dialError{err}
	}
	if u.tlsConfig != nil {
		tc := tls.Client(nc, u.tlsConfig)
		hctx, cancel := context.WithTimeout(ctx, u.connectTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, &dialError{err}
		}
		nc = tc
	}
	c := &upConn{Conn: nc, br: bufio.NewReaderSize(nc, 8192), peek: newSockPeek(nc)}
	c.bw = bufio.NewWriterSize(c, 8192)
	c.tcp, _ = nc.(*net.TCPConn)
	return c, nil
}

// idleConnUsable reports whether a pooled connection can carry a request. An
// HTTP/1.1 upstream sends nothing on an idle connection: bytes waiting on it, or
// a pending end of stream or reset, mean the upstream closed it (or broke the
// framing) while it sat in the pool. Checking before the request is written is
// what makes re-sending a request unnecessary.
func idleConnUsable(c *upConn) bool {
	return c.br.Buffered() == 0 && !c.peek.closedOrSent()
}

func (u *upstream) putConn(c *upConn) {
	_ = c.SetDeadline(time.Time{})
	c.lastUsed = time.Now()
	u.mu.Lock()
	if len(u.idle) >= u.maxIdle {
		u.mu.Unlock()
		_ = c.Close()
		return
	}
	u.idle = append(u.idle, c)
	u.mu.Unlock()
}

// closeIdle closes every idle connection (shutdown).
func (u *upstream) closeIdle() {
	u.mu.Lock()
	idle := u.idle
	u.idle = nil
	u.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}

type dialError struct{ err error }

func (e *dialError) Error() string { return "connecting to upstream: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func isStaleConnError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// upstreamError maps a transport failure to the error the client sees: a timeout
// is 504, a cancelled client 499, anything else 502.
func upstreamError(name string, err error) *interceptors.Error {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return &interceptors.Error{Status: StatusClientClosed, Type: "client_error", Code: "client_closed_request",
			Message: "the client closed the request before the upstream answered", Err: err}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fasthttp.ErrTimeout) || (errors.As(err, &ne) && ne.Timeout()):
		return &interceptors.Error{Status: fasthttp.StatusGatewayTimeout, Type: "upstream_error", Code: "upstream_timeout",
			Message: fmt.Sprintf("upstream %q did not answer in time", name), Err: err}
	case errors.Is(err, errUpstreamBusy):
		return &interceptors.Error{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "upstream_saturated",
			Message: fmt.Sprintf("upstream %q: %v", name, err), Err: err}
	}
	if errors.Is(err, errMalformedAnswer) || errors.Is(err, errEmptyAnswer) {
		return &interceptors.Error{Status: fasthttp.StatusBadGateway, Type: "upstream_error", Code: "upstream_bad_response",
			Message: fmt.Sprintf("upstream %q: %v", name, err), Err: err}
	}
	var ue *unavailableError
	if errors.As(err, &ue) {
		return &interceptors.Error{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "upstream_unavailable",
			Message: ue.Error(), Err: err}
	}
	var de *dialError
	if errors.As(err, &de) {
		return &interceptors.Error{Status: fasthttp.StatusBadGateway, Type: "upstream_error", Code: "upstream_unreachable",
			Message: fmt.Sprintf("upstream %q is unreachable", name), Err: err}
	}
	return &interceptors.Error{Status: fasthttp.StatusBadGateway, Type: "upstream_error", Code: "upstream_failed",
		Message: fmt.Sprintf("upstream %q failed: %v", name, err), Err: err}
}

// StatusClientClosed is the status logged and counted when the client went away
// before the answer (nginx's 499); the client never sees it.
const StatusClientClosed = 499
